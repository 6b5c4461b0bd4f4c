"""A command of this app run as a person runs it, its stderr on a terminal."""

from __future__ import annotations

import os
import pty
import subprocess
import sys


def on_a_terminal(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    """Runs ``stream-app`` with ``args``, stderr on a pseudo-terminal; its exit status and
    what it drew there. ``env``: the command's environment (None: this process's)."""
    leader, follower = pty.openpty()
    done = subprocess.run(
        [sys.executable, "-m", "stream_app", *args],
        stderr=follower,
        stdout=subprocess.DEVNULL,
        env=env,
        timeout=120,
        check=False,
    )
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal's other end is closed: all is read
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    return done.returncode, shown.decode(errors="replace")

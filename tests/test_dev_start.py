"""Issue 23 item 4: ``stream-app dev`` refuses what would fail later before it starts anything.

A taken broker port, a demo file that cannot be read or holds a line that is no record: one
line, exit 2, nothing on stdout (the first thing dev prints once it starts is "starting the
embedded broker"), and no temporary folder left behind. The runs that start a broker and a
worker are in ``tests/test_dev.py``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from stream_app.broker.embedded import free_port

ROOT = Path(__file__).resolve().parent.parent


def dev(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STREAM_APP_WEB_PORT": str(free_port()), "TMPDIR": str(tmp)}
    return subprocess.run(
        [sys.executable, "-m", "stream_app", "dev", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_a_taken_broker_port_is_one_line_and_exit_2_before_anything_starts(
    tmp_path: Path,
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = dev("--port", str(port), tmp=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"stream-app dev: port {port} (--port) is in use (")
    assert line.endswith("leave --port out for a free one")
    assert done.stdout == ""  # no broker was started
    assert list(tmp_path.iterdir()) == []


def test_a_demo_file_that_cannot_be_read_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "nope.jsonl"
    done = dev("--demo-file", str(missing), tmp=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == f"stream-app dev: cannot read {missing}: No such file or directory\n"
    assert done.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_a_demo_line_that_is_no_record_is_refused_with_its_line_number(tmp_path: Path) -> None:
    demo = tmp_path / "demo.jsonl"
    first = (ROOT / "examples" / "session.jsonl").read_text().splitlines()[0]
    demo.write_text(f"{first}\n{{not json\n")
    done = dev("--demo-file", str(demo), tmp=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"stream-app dev: {demo}:2: line is not JSON")
    assert done.stdout == ""
    assert list(tmp_path.iterdir()) == [demo]

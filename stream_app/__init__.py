"""Turn pipeline: LLM messages and developer decisions in, one Turn per inference call out.

Which release runs: ``__version__`` is the installed package's version (pyproject.toml's,
bumped per release: the one place it is written), ``commit()`` the git commit it was built
from when known, ``release()`` the two as ``stream-app --version``, the ``startup`` line and
``stream_app_build_info`` name them.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

try:
    __version__ = version("stream-app")
except PackageNotFoundError:  # imported from a checkout that was never installed
    __version__ = "0+unknown"

# The commit of an image, which has no .git: `docker build --build-arg SOURCE_COMMIT=...`
# (the Dockerfile makes it this variable). Not STREAM_APP_*: that prefix is the settings'.
COMMIT_VARIABLE = "SOURCE_COMMIT"
GIT_TIMEOUT = 2.0  # seconds; a git that does not answer by then names no commit
_COMMIT = re.compile(r"[0-9a-f]{4,40}")


@functools.cache
def commit() -> str | None:
    """The commit this code is from: ``SOURCE_COMMIT`` when set, else the HEAD of the git
    checkout the package is in (asked once, with a timeout), else None (an installed
    package, no git, a git that fails: never an error)."""
    given = os.environ.get(COMMIT_VARIABLE, "").strip().lower()
    if given:
        return given if _COMMIT.fullmatch(given) else None
    package = Path(__file__).resolve().parent
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--show-toplevel", "--short", "HEAD"],
            cwd=package,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            check=False,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    lines = done.stdout.split()
    if done.returncode != 0 or len(lines) != 2:
        return None
    top, head = lines
    # Only this project's own checkout: a package installed in some other repository's
    # tree (a virtualenv inside a checkout) is not built from that repository's HEAD.
    try:
        ours = Path(top).resolve() == package.parent
    except (OSError, ValueError):
        return None
    return head.lower() if ours and _COMMIT.fullmatch(head.lower()) else None


def release() -> str:
    """The release, precisely: the version, with the commit as a PEP 440 local label when
    known (``0.2.0+g7092ffb``, as setuptools-scm writes it; ``0.2.0`` when not)."""
    at = commit()
    if at is None:
        return __version__
    return f"{__version__}{'.' if '+' in __version__ else '+'}g{at}"

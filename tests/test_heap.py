"""The worker's allocator (``stream_app/heap.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stream_app import heap

pytestmark = pytest.mark.skipif(not heap.give_back(), reason="no malloc_trim (not glibc)")


def test_a_worker_restarts_itself_on_the_system_allocator(tmp_path: Path) -> None:
    # pymalloc kept a worker holding 100,000 sessions at 443 MiB at rest, glibc's allocator
    # with malloc_trim at 175 MiB: the worker command re-executes itself with it.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONMALLOC"}
    env |= {"STREAM_APP_BROKER_URL": "kafka://127.0.0.1:9", "STREAM_APP_DATA_DIR": str(tmp_path)}
    worker = subprocess.Popen(
        [sys.executable, "-m", "stream_app", "worker"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        environ = Path(f"/proc/{worker.pid}/environ")
        deadline = time.monotonic() + 30
        while b"PYTHONMALLOC=malloc" not in environ.read_bytes().split(b"\0"):
            assert time.monotonic() < deadline, "the worker did not restart on malloc"
            assert worker.poll() is None, "the worker exited"
            time.sleep(0.05)
    finally:
        worker.kill()
        worker.wait()


def test_an_allocator_the_user_chose_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONMALLOC", "pymalloc")
    calls: list[object] = []
    monkeypatch.setattr(os, "execve", lambda *args: calls.append(args))
    heap.use_system_allocator()
    assert calls == []

"""The worker's allocator (``stream_app/heap.py``)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time
import weakref
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


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_a_cycle_frozen_at_a_checkpoint_is_collected_by_the_full_collection() -> None:
    # freeze_survivors spares the collector the state at every checkpoint; a cycle that
    # was alive then is garbage no ordinary collection finds, so collect_frozen must.
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    try:
        heap.freeze_survivors()
        assert gc.get_freeze_count() > 0
        del a, b
        gc.collect()
        assert gone() is not None  # frozen: out of the collector's reach
        heap.collect_frozen()
        assert gone() is None
    finally:
        gc.unfreeze()

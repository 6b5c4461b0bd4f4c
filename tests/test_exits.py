"""Issue 20 item 3: a worker's end is bounded and says once how it ended (``worker/exits.py``).

The watchdog's exit is ``os._exit``, so each case runs in a process of its own, whose main
thread hangs as a stuck stop does."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import time
from typing import Any

import faust
import orjson
import pytest

from stream_app.worker import exits
from stream_app.worker.exits import BoundedWorker

HANG = """
import sys, threading
from stream_app.worker import exits
from stream_app.observability import logs

class Stub:
    ending = False
    reason = None

stub, last = Stub(), exits.LastWord()
exits.Watchdog(stub, last, crash_bound=0.5, stop_bound=1.0).start()
{what}
threading.Event().wait()  # a stop that never finishes, deaf to signals
"""


def _hang(what: str) -> tuple[int, float, list[dict[str, Any]]]:
    """Exit status, seconds to exit and the events of a process whose stop hangs."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", HANG.format(what=textwrap.dedent(what))],
        capture_output=True,
        timeout=30,
    )
    seconds = time.monotonic() - started
    events = [orjson.loads(line) for line in done.stderr.splitlines() if line.startswith(b"{")]
    return done.returncode, seconds, events


def test_a_crash_whose_stop_hangs_ends_with_one_crash_line_and_status_1() -> None:
    status, seconds, events = _hang(
        """
        stub.reason = RuntimeError("ProducerSendError: the broker refused")
        stub.ending = True
        """
    )
    assert status == 1
    assert seconds < 5  # 0.5 s bound, and a Python start
    assert [e["event"] for e in events] == ["crash"]
    (crash,) = events
    assert crash["type"] == "RuntimeError" and "the broker refused" in crash["error"]
    assert crash["stop"] == "forced" and crash["level"] == "error"


def test_a_stop_that_hangs_is_forced_and_logged_as_forced_not_graceful() -> None:
    status, seconds, events = _hang("stub.ending = True")
    assert status == 1 and seconds < 5
    (event,) = events
    assert (event["event"], event["mode"]) == ("shutdown", "forced")
    assert "did not finish in 1 s" in event["reason"]


def test_an_end_already_told_is_not_told_again_when_the_exit_is_forced() -> None:
    # The main thread logged its graceful stop; something (a thread joined at exit) hangs.
    status, _, events = _hang(
        """
        last.shutdown("graceful")
        stub.ending = True
        """
    )
    assert status == 0
    assert [(e["event"], e["mode"]) for e in events] == [("shutdown", "graceful")]


def test_the_last_word_is_said_once() -> None:
    last = exits.LastWord()
    assert last.crash(TypeError("first")) == 1
    assert last.shutdown("graceful") == 1  # too late: the crash was the end
    assert last.crash(ValueError("second"), 3) == 1


@pytest.fixture
def worker() -> BoundedWorker:
    return BoundedWorker(faust.App("test-exits", broker="kafka://127.0.0.1:9"))


def test_the_worker_names_the_first_crash_not_the_cancellations_after_it(
    worker: BoundedWorker,
) -> None:
    # Faust records every crash, the last winning; tearing down after the first crash
    # cancels agents, which crash again with CancelledError, and that was then raised.
    error = TypeError("'int' object is not iterable")
    worker.crash_reason = error
    worker.crash_reason = asyncio.CancelledError()
    worker.crash_reason = KeyError("later")
    assert worker.crash_reason is error and worker.reason is error
    worker.crash_reason = None  # Faust's reset of a restarted service
    assert worker.crash_reason is None


def test_a_cancellation_first_gives_way_to_the_error_after_it(worker: BoundedWorker) -> None:
    worker.crash_reason = asyncio.CancelledError()
    error = RuntimeError("the producer failed")
    worker.crash_reason = error
    assert worker.crash_reason is error


def test_a_cancellation_once_the_stop_has_begun_is_no_crash(worker: BoundedWorker) -> None:
    asyncio.run(worker.stop())  # as SIGTERM starts it
    worker.crash_reason = asyncio.CancelledError()  # an agent cancelled by the stop
    assert worker.crash_reason is None and worker.reason is None
    error = RuntimeError("the producer failed")
    worker.crash_reason = error  # a real error during the stop is one
    assert worker.reason is error


def test_the_worker_is_ending_once_its_run_ends(worker: BoundedWorker) -> None:
    assert not worker.ending and worker.reason is None
    with pytest.raises(OSError):
        try:
            raise OSError("address in use")
        finally:
            worker.on_worker_shutdown()  # as Faust calls it, start-up's error on its way out
    assert worker.ending
    assert isinstance(worker.reason, OSError)

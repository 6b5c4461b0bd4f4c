"""Issue 10 item 6 and issue 20 item 3: ``stream-app worker`` ends with a line that says how
it ended, and ends within a bound.

A worker that dies of an error logs one ``crash`` event and exits non-zero within 15 s, even
when its stop hangs; a worker stopped by SIGTERM exits 0 with a graceful ``shutdown`` event,
or, with the broker gone, within 20 s with a ``forced`` one. Real worker processes, real
broker.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Producer

from stream_app.broker.embedded import EmbeddedBroker
from tests.test_faults import RAISES  # a record that makes the core raise
from tests.worker_process import WorkerProcess

pytestmark = pytest.mark.broker

# ``stream-app worker`` whose stop never finishes: a receiver of Faust's signal, sent as the
# app stops, that waits for ever and shrugs off cancellation.
HANGING_STOP = """
import asyncio, sys
from stream_app.app import app

@app.on_before_shutdown.connect
async def hang(sender, **kwargs):
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            pass

from stream_app.cli.main import main
sys.exit(main(["worker", "--loglevel", "info"]))
"""


def _events(log: Path) -> list[dict[str, Any]]:
    """The structured event lines of a worker's log (the rest is Faust's own log)."""
    found = []
    for line in log.read_text().splitlines():
        if line.startswith("{"):
            doc = orjson.loads(line)
            if isinstance(doc, dict) and "event" in doc:
                found.append(doc)
    return found


def _named(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == name]


def _exit_status(worker: WorkerProcess, timeout: float = 60.0) -> int:
    assert worker.process is not None
    try:
        return worker.process.wait(timeout)
    except subprocess.TimeoutExpired:
        worker.stop()
        raise AssertionError(f"worker still running: {worker.log.read_text()[-3000:]}") from None


def _until(done: Callable[[], bool], timeout: float, what: str, worker: WorkerProcess) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} in {timeout} s: {worker.log.read_text()[-3000:]}")
        time.sleep(0.05)


def _crash(broker: EmbeddedBroker, topics: dict[str, str]) -> float:
    """Sends a record whose processing raises (a crash with the policy ``stop``); when."""
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(f"{topics['STREAM_APP_ID']}-sessions", RAISES, b"s1")
    assert producer.flush(10) == 0
    return time.monotonic()


def test_a_worker_that_crashes_while_running_logs_one_crash_line_and_exits_1(
    broker: EmbeddedBroker, topics: dict[str, str], workdir: Path
) -> None:
    settings = {**topics, "STREAM_APP_ON_PROCESSING_ERROR": "stop"}
    worker = WorkerProcess(broker, settings, workdir).start()
    try:
        worker.wait_ready()
        # A record whose processing raises, with the policy that stops the worker: Faust
        # stops it ("We experienced a crash!") and re-raises the error.
        sent = _crash(broker, topics)
        status = _exit_status(worker)
        seconds = time.monotonic() - sent
    finally:
        worker.stop()
    events = _events(worker.log)
    crashes = _named(events, "crash")
    assert status == 1, worker.log.read_text()[-3000:]
    assert seconds < 15, seconds
    assert len(crashes) == 1, events
    assert crashes[0]["level"] == "error" and crashes[0]["type"] == "TypeError"
    assert not _named(events, "shutdown")
    assert events[-1]["event"] == "crash"  # the last word is the crash
    print(f"\ncrash to exit: {seconds:.1f} s")


def test_a_crashed_worker_whose_stop_hangs_exits_1_within_15_s_sigterm_or_not(
    broker: EmbeddedBroker, topics: dict[str, str], workdir: Path
) -> None:
    settings = {**topics, "STREAM_APP_ON_PROCESSING_ERROR": "stop"}
    worker = WorkerProcess(broker, settings, workdir)
    worker.command = [sys.executable, "-c", HANGING_STOP]
    worker.start()
    try:
        worker.wait_ready()
        sent = _crash(broker, topics)
        # The agent has crashed and the stop is stuck: the liveness probe sees it.
        _until(lambda: worker.status("/health") == 503, 10, "/health 503", worker)
        assert worker.process is not None
        worker.process.terminate()  # Faust's handler only waits for the stop under way
        status = _exit_status(worker, timeout=30)
        seconds = time.monotonic() - sent
    finally:
        worker.stop()
    events = _events(worker.log)
    assert status == 1, worker.log.read_text()[-3000:]
    assert seconds < 15, seconds
    (crash,) = _named(events, "crash")
    assert crash["type"] == "TypeError" and crash["stop"] == "forced"
    assert not _named(events, "shutdown") and events[-1]["event"] == "crash"
    print(f"\ncrash to forced exit: {seconds:.1f} s")


def test_a_worker_that_cannot_start_logs_one_crash_line_and_exits_1(
    broker: EmbeddedBroker, topics: dict[str, str], workdir: Path
) -> None:
    worker = WorkerProcess(broker, topics, workdir)
    with socket.socket() as taken:  # its web port, held by someone else
        taken.bind(("127.0.0.1", worker.port))
        taken.listen()
        worker.start()
        status = _exit_status(worker)
    events = _events(worker.log)
    crashes = _named(events, "crash")
    assert status == 1, worker.log.read_text()[-3000:]
    assert len(crashes) == 1, events
    assert crashes[0]["type"] == "OSError" and str(worker.port) in crashes[0]["error"]
    assert not _named(events, "shutdown")


def test_sigterm_stops_a_worker_gracefully_with_status_0(
    broker: EmbeddedBroker, topics: dict[str, str], workdir: Path
) -> None:
    worker = WorkerProcess(broker, topics, workdir).start()
    try:
        worker.wait_ready()
        assert worker.process is not None
        worker.process.terminate()
        status = _exit_status(worker)
    finally:
        worker.stop()
    events = _events(worker.log)
    assert status == 0, worker.log.read_text()[-3000:]
    assert [e["mode"] for e in _named(events, "shutdown")] == ["graceful"]
    assert not _named(events, "crash")


def test_sigterm_with_the_broker_gone_exits_within_20_s_logged_as_forced(
    topics: dict[str, str], workdir: Path
) -> None:
    own = EmbeddedBroker(log=workdir / "tansu.log").start()
    worker = WorkerProcess(own, topics, workdir).start()
    try:
        worker.wait_ready()
        own.stop()
        # While the broker is away the project says so once per attempt (every 5 s, once
        # it counts as gone), and the client's own complaints pass once in a while.
        _until(
            lambda: len(_named(_events(worker.log), "broker_unreachable")) >= 2,
            60,
            "two broker_unreachable lines",
            worker,
        )
        assert worker.process is not None
        worker.process.terminate()
        stopped = time.monotonic()
        # The stop waits for a consumer thread that has died: not live any more.
        _until(lambda: worker.status("/health") == 503, 10, "/health 503", worker)
        status = _exit_status(worker, timeout=60)
        seconds = time.monotonic() - stopped
    finally:
        worker.stop()
        own.stop()
    events = _events(worker.log)
    assert status == 1, worker.log.read_text()[-3000:]
    assert seconds < 20, seconds  # the StatefulSet's grace period is 60 s
    assert [(e["mode"], e["level"]) for e in _named(events, "shutdown")] == [("forced", "error")]
    assert events[-1]["event"] == "shutdown" and not _named(events, "crash")
    attempts = [e["attempt"] for e in _named(events, "broker_unreachable")]
    assert attempts == list(range(attempts[0], attempts[0] + len(attempts)))
    # Every record is one JSON line, a traceback included; aiokafka said ~385 ERROR lines
    # in 5 s before, once a kind each 30 s now.
    lines = worker.log.read_bytes().splitlines()
    records = [orjson.loads(line) for line in lines if line.strip()]
    assert all(isinstance(r, dict) and "level" in r for r in records)
    client = [r for r in records if r.get("logger", "").startswith("aiokafka")]
    kinds = {(r["logger"], r["level"], r["message"].split(":")[0]) for r in client}
    assert len(client) <= 2 * len(kinds) + 5, [r["message"] for r in client]
    print(f"\nSIGTERM to exit with the broker gone: {seconds:.1f} s, {len(client)} client lines")

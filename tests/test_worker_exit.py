"""Issue 10 item 6: ``stream-app worker`` ends with a line that says how it ended.

A worker that dies of an error logs one ``crash`` event and exits non-zero; a worker stopped
by SIGTERM exits 0 with a graceful ``shutdown`` event. Real worker processes, real broker.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Producer

from stream_app.embedded_broker import EmbeddedBroker
from tests.test_faults import RAISES  # a record that makes the core raise
from tests.worker_process import WorkerProcess

pytestmark = pytest.mark.broker


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


def test_a_worker_that_crashes_while_running_logs_one_crash_line_and_exits_1(
    broker: EmbeddedBroker, topics: dict[str, str], workdir: Path
) -> None:
    settings = {**topics, "STREAM_APP_ON_PROCESSING_ERROR": "stop"}
    worker = WorkerProcess(broker, settings, workdir).start()
    try:
        worker.wait_ready()
        # A record whose processing raises, with the policy that stops the worker: Faust
        # stops it ("We experienced a crash!") and re-raises the error.
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce(f"{topics['STREAM_APP_ID']}-sessions", RAISES, b"s1")
        assert producer.flush(10) == 0
        status = _exit_status(worker)
    finally:
        worker.stop()
    events = _events(worker.log)
    crashes = _named(events, "crash")
    assert status == 1, worker.log.read_text()[-3000:]
    assert len(crashes) == 1, events
    assert crashes[0]["level"] == "error" and crashes[0]["type"] == "TypeError"
    assert not _named(events, "shutdown")
    assert events[-1]["event"] == "crash"  # the last word is the crash


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

"""Issue 10 item 7: a worker started before its broker waits for it, and says so.

One line per attempt and no traceback while the broker is absent; ``/health`` 200 and
``/ready`` 503 meanwhile; ready and processing once the broker is there; ``/ready`` 503
again when it goes away. A real worker process and a real broker started late on its port.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from stream_app.broker.embedded import EmbeddedBroker
from tests.kafka_io import TopicReader, create_topics, publish
from tests.test_app import example_lines, replayed
from tests.test_worker_exit import _events, _named
from tests.worker_process import WorkerProcess

pytestmark = pytest.mark.broker


def _until(done: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def test_a_worker_waits_for_an_absent_broker_and_serves_once_it_comes(
    topics: dict[str, str], workdir: Path
) -> None:
    late = EmbeddedBroker(log=workdir / "tansu.log")  # its port, nothing listening yet
    worker = WorkerProcess(late, {**topics, "STREAM_APP_PARTITIONS": "4"}, workdir).start()
    try:
        _until(
            lambda: len(_named(_events(worker.log), "broker_unreachable")) >= 3,
            30,
            "three attempts",
        )
        assert worker.status("/health") == 200
        assert worker.status("/ready") == 503
        attempts = _named(_events(worker.log), "broker_unreachable")
        assert [a["attempt"] for a in attempts[:3]] == [1, 2, 3]
        assert [a["retry_in_s"] for a in attempts[:3]] == [0.5, 1.0, 2.0]
        log = worker.log.read_text()
        assert "Traceback" not in log and "Unclosed" not in log, log[-2000:]

        with late:
            names = {"messages": topics["STREAM_APP_TOPIC_MESSAGES"]}
            names["decisions"] = topics["STREAM_APP_TOPIC_DECISIONS"]
            create_topics(late.bootstrap, names.values(), 4)
            create_topics(
                late.bootstrap,
                [topics["STREAM_APP_TOPIC_TURNS"], topics["STREAM_APP_TOPIC_DLQ"]],
                4,
            )
            worker.wait_ready(timeout=90)
            assert _named(_events(worker.log), "broker_reachable")
            lines = example_lines()
            expected, _ = replayed(lines, topics)
            publish(late.bootstrap, lines, names)
            turns = TopicReader(late.bootstrap, topics["STREAM_APP_TOPIC_TURNS"], 4)
            try:
                turns.wait_until(
                    lambda: {k.decode() for _, k, _ in turns.records} == set(expected),
                    60,
                    "the example's turns",
                )
            finally:
                turns.close()
        # The broker is gone: the worker stays alive and says it cannot serve.
        _until(lambda: worker.status("/ready") == 503, 60, "/ready 503 without a broker")
        assert worker.status("/health") == 200
    finally:
        worker.stop()

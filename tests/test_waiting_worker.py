"""Issue 43 item 1 on a real worker: a user message no finishing message closes, and a
decision for a turn that never comes, are counted on /metrics and named once in the log."""

from __future__ import annotations

import time
from collections import Counter

import orjson
import pytest

from tests.factories import ORG, decision, message
from tests.test_app import PARTITIONS, Pipeline
from tests.test_metrics import scrape
from tests.worker_process import WorkerProcess

pytestmark = pytest.mark.broker


def waiting_lines(worker: WorkerProcess) -> Counter[tuple[str, str]]:
    """(session_id, kind) of each ``waiting_too_long`` line the worker logged."""
    found: Counter[tuple[str, str]] = Counter()
    for line in worker.log.read_bytes().splitlines():
        if line.startswith(b"{") and b'"waiting_too_long"' in line:
            doc = orjson.loads(line)
            found[(doc["session_id"], doc["kind"])] += 1
    return found


def test_a_message_never_finished_and_a_decision_never_joined_show_on_metrics_and_in_the_log(
    pipeline: Pipeline,
) -> None:
    p = pipeline
    worker = WorkerProcess(
        p.broker,
        {
            **p.topics,
            "STREAM_APP_PARTITIONS": str(PARTITIONS),
            "STREAM_APP_ORG_ID": ORG,
            "STREAM_APP_WAITING_WARN_SECONDS": "2",
            "STREAM_APP_FINAL_TICK_SECONDS": "0.5",
        },
        p.workdir,
    )
    p.workers.append(worker)
    worker.start().wait_ready()
    p.publish(
        [
            {"topic": "messages", "key": "w1", "value": message("w1", message_id="u1")},
            {"topic": "decisions", "key": "w2", "value": decision("w2", "no-such-turn")},
        ]
    )

    def figures() -> tuple[float, float, float, float]:
        m = scrape(worker.port)
        return (
            m[("stream_app_messages_waiting_sessions", ())],
            m[("stream_app_decisions_waiting_sessions", ())],
            m[("stream_app_messages_waiting_oldest_seconds", ())],
            m[("stream_app_decisions_waiting_oldest_seconds", ())],
        )

    deadline = time.monotonic() + 60
    while (found := figures())[:2] != (1, 1):
        assert time.monotonic() < deadline, f"{found}; {worker.log.read_text()[-3000:]}"
        time.sleep(0.1)
    assert found[2] >= 2 and found[3] >= 2
    # Later ticks still count them, and name them no more.
    while (later := figures())[2] < found[2] + 2:
        assert time.monotonic() < deadline, f"{later}; {worker.log.read_text()[-3000:]}"
        time.sleep(0.1)
    assert later[:2] == (1, 1)
    assert waiting_lines(worker) == {("w1", "messages"): 1, ("w2", "decisions"): 1}

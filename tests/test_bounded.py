"""Issue 19 on a running worker: no session can stop, slow or bloat the pipeline.

Each of these stopped the worker on every restart before the per-session limits (its state
was one changelog record, refused by the producer past 16 MiB): a session that piles up
~950 KB messages with no finish, a decision whose key is 17 MiB, and records whose tool
calls and parts expand past the record limit once translated.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import orjson
import pytest

from stream_app.broker.embedded import EmbeddedBroker
from tests.contracts import assert_valid_dead_letter
from tests.factories import assistant, decision, message, tool_call
from tests.kafka_io import final_turns, publish
from tests.test_app import Pipeline
from tests.test_metrics import scrape
from tests.worker_checks import ready_worker, still_running

pytestmark = pytest.mark.broker

BIG = 950 * 1024  # a message of ~950 KB: under the 1 MiB record limit
RUNAWAY = 20  # such messages, no finish: 8 fit the 8 MiB of pending bytes, 12 do not


def line(topic: str, key: str | None, value: Any) -> dict[str, Any]:
    return {"topic": topic, "key": key, "value": value}


def test_a_runaway_session_beside_victims_never_stops_the_worker(
    broker: EmbeddedBroker, topics: dict[str, str], pipeline: Pipeline
) -> None:
    p = pipeline
    worker = ready_worker(p)
    assert worker.process is not None
    pid = worker.process.pid
    victims = [f"victim-{i}" for i in range(8)]
    runaway = [
        line("messages", "runaway", message("runaway", text="x" * BIG, message_id=f"r{i}"))
        for i in range(RUNAWAY)
    ]
    expanding = [
        line(
            "messages",
            "expander",
            assistant(
                "expander",
                message_id=f"e{i}",
                content=[{"text": "a"}] * 50_000,
                tool_calls=[tool_call("")] * 2_000,
            ),
        )
        for i in range(6)
    ]
    before = [line("messages", v, message(v, text="hi", message_id=f"{v}-u")) for v in victims]
    after = [
        line("messages", v, assistant(v, message_id=f"{v}-a", tool_calls=[tool_call("c")]))
        for v in victims
    ]
    p.publish([*before, *runaway, *expanding, *after])
    publish(
        broker.bootstrap,
        [line("decisions", "k" * (17 * 1024 * 1024), decision(victims[0], org_id="default"))],
        {"decisions": topics["STREAM_APP_TOPIC_DECISIONS"]},
        **{"message.max.bytes": str(40 * 1024 * 1024)},
    )
    p.turns.wait_until(lambda: len(final_turns(p.turns)) == len(victims), 120, "victims")
    p.dlq.wait_until(lambda: len(p.dlq.records) >= 12 + 6 + 1, 120, "dead letters")

    reasons = Counter(d["reason"] for d in p.dlq.values())
    assert reasons == {"session_limit": 12 + 1, "too_large": 6}, reasons
    for letter in p.dlq.values():
        assert_valid_dead_letter(letter)
        if letter["reason"] == "session_limit" and "runaway" in letter["error"]:
            assert "max_pending_bytes" in letter["error"]
    (keyed,) = [d for d in p.dlq.values() if d.get("original_key_length")]
    assert keyed["original_key_length"] == 17 * 1024 * 1024 and "key:" in keyed["error"]
    for v in victims:
        turn = final_turns(p.turns)[orjson.dumps([v, f"{v}-a"]).decode()]
        assert turn["new_messages"][0]["parts"][0]["content"] == "hi"

    deadline = time.monotonic() + 60
    while True:  # the runaway's state, written at a checkpoint, then committed
        m = scrape(worker.port)
        limited = m.get(("stream_app_dead_letters_total", (("reason", "session_limit"),)))
        if limited == 13 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert limited == 13
    log = still_running(worker)
    assert worker.process.pid == pid and worker.status("/health") == 200
    assert "Traceback" not in log and "MessageSizeTooLarge" not in log, log[-3000:]
    # And it restarts cleanly from what it wrote.
    worker.stop()
    worker.start().wait_ready()
    assert "MessageSizeTooLarge" not in worker.log.read_text(errors="replace")

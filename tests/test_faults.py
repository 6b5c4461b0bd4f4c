"""Issue 20 item 1 on a running worker: a record whose processing raises, and records on the
internal ``<id>-sessions`` topic that the intake never wrote, are dead letters; the records
after them in the same partition are applied, and the worker goes on."""

from __future__ import annotations

from collections import Counter

import orjson
import pytest

from stream_app.core.intake import decode
from stream_app.core.policy import Policy
from stream_app.core.records import SourceRecord, dump_input
from tests.contracts import assert_valid_dead_letter
from tests.factories import assistant, message, tool_call
from tests.kafka_io import final_turns
from tests.test_app import Pipeline
from tests.test_metrics import scrape
from tests.worker_checks import ready_worker, still_running, to_sessions_topic

pytestmark = pytest.mark.broker

# Decodes as a session input, and makes the core raise: its message's parts are no list.
RAISES = orjson.dumps(
    {"m": ["s1", None, None, {"parts": 5}, "a0", 10, ["t", 0, 0, None, None, "utf-8"], None]}
)


def forwarded(value: dict[str, object], offset: int) -> bytes:
    """A session input as the intake forwards it."""
    record = SourceRecord("messages", "llm", 0, offset, b"s1", orjson.dumps(value))
    item, _ = decode(record, Policy(org_id="default"), 0.0)
    assert item is not None
    return dump_input(item)


def test_records_that_raise_or_were_never_written_by_the_intake_are_dead_letters(
    pipeline: Pipeline,
) -> None:
    p = pipeline
    worker = ready_worker(p)
    sessions_topic = to_sessions_topic(
        p,
        b"s1",
        [
            b"{not json",
            b'{"m": [1, 2]}',
            RAISES,
            forwarded(message(text="after them", message_id="u1"), 1),
            forwarded(assistant(message_id="a1", tool_calls=[tool_call("c1")]), 2),
        ],
    )

    p.turns.wait_until(lambda: len(final_turns(p.turns)) == 1, 60, "the turn after them")
    p.dlq.wait_until(lambda: len(p.dlq.records) == 3, 60, "3 dead letters")
    (turn,) = final_turns(p.turns).values()
    assert turn["new_messages"][0]["parts"][0]["content"] == "after them"
    letters = p.dlq.values()
    for letter in letters:
        assert_valid_dead_letter(letter)
        assert letter["source_topic"] == sessions_topic
    assert Counter(d["reason"] for d in letters) == {"schema": 2, "processing_error": 1}
    (raised,) = [d for d in letters if d["reason"] == "processing_error"]
    assert "TypeError" in raised["error"] and raised["value"] == RAISES.decode()
    m = scrape(worker.port)
    assert m[("stream_app_dead_letters_total", (("reason", "processing_error"),))] == 1
    assert '"event":"processing_error"' in still_running(worker)


def test_a_record_that_stops_the_worker_is_read_again_when_it_starts(
    pipeline: Pipeline,
) -> None:
    # STREAM_APP_ON_PROCESSING_ERROR=stop: the worker stops on the record, and its stop
    # must not checkpoint the batch the record was in (issue 20 item 1: it committed the
    # offset past it, and past the valid records fetched after it, which were lost).
    p = pipeline
    stopping = ready_worker(p, "stopping", STREAM_APP_ON_PROCESSING_ERROR="stop")
    to_sessions_topic(
        p,
        b"s1",
        [
            forwarded(message(text="before it", message_id="u0"), 1),
            RAISES,
            forwarded(message(text="after it", message_id="u1"), 2),
            forwarded(assistant(message_id="a1", tool_calls=[tool_call("c1")]), 3),
        ],
    )
    assert stopping.process is not None
    assert stopping.process.wait(60) != 0
    assert '"event":"crash"' in stopping.log.read_text(errors="replace")

    ready_worker(p, "again")  # the default policy: the record is a dead letter now
    p.turns.wait_until(lambda: len(final_turns(p.turns)) == 1, 60, "the turn")
    p.dlq.wait_until(lambda: len(p.dlq.records) >= 1, 60, "the dead letter")
    (turn,) = final_turns(p.turns).values()
    texts = [m["parts"][0]["content"] for m in turn["new_messages"]]
    assert texts == ["before it", "after it", "done"]
    assert [d["reason"] for d in p.dlq.values()] == ["processing_error"]

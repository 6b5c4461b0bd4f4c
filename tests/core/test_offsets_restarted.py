"""Issue 20 item 4: a topic made again (or a cluster moved) starts its offsets again; a live
session's new records must not be taken for records it has applied."""

from __future__ import annotations

import orjson

from stream_app.core.policy import Policy
from stream_app.core.records import SourceRecord
from stream_app.state.memory import MemorySessions
from stream_app.worker.pipeline import Pipeline
from tests.factories import ORG, assistant, message

T0 = 1_767_261_600.0


def record(offset: int, value: dict[str, object], at: float | None) -> SourceRecord:
    return SourceRecord("messages", "llm.messages", 0, offset, b"s1", orjson.dumps(value), at)


def test_records_below_the_applied_offset_stamped_later_are_new_and_applied() -> None:
    pipeline = Pipeline(Policy(org_id=ORG), MemorySessions(), clock=lambda: T0)
    for offset in range(5):
        out = pipeline.process(record(offset, message(text=f"m{offset}"), T0 + offset))
        assert out.outcome == "contributed"
    # Read again after a restart: the same offsets and timestamps.
    again = pipeline.process(record(3, message(text="m3"), T0 + 3))
    assert again.outcome == "duplicate" and again.counts["reprocessed"] == 1
    # The topic made again: offsets from 0, records stamped after everything applied.
    fresh = pipeline.process(record(0, message(text="after the move"), T0 + 60))
    assert fresh.outcome == "contributed" and fresh.counts["offsets_restarted"] == 1
    (turn,) = pipeline.process(record(1, assistant(message_id="a1"), T0 + 61)).turns
    texts = [m["parts"][0]["content"] for m in turn.turn["new_messages"]]
    assert texts == ["m0", "m1", "m2", "m3", "m4", "after the move", "done"]
    # And the new log's records read again are recognised as such.
    assert pipeline.process(record(0, message(text="after the move"), T0 + 60)).outcome == (
        "duplicate"
    )


def test_without_timestamps_a_record_below_the_applied_offset_stays_a_reread() -> None:
    pipeline = Pipeline(Policy(org_id=ORG), MemorySessions(), clock=lambda: T0)
    pipeline.process(record(4, message(text="m4"), None))
    assert pipeline.process(record(0, message(text="new?"), None)).outcome == "duplicate"

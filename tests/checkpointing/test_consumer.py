"""The holes closed in Faust's commit bookkeeping (``checkpointing/consumer.py``).

Each test drives the real Faust consumer of this app (no broker is needed to count acks)
and fails with Faust's own ``ack`` / ``_new_offset`` / ``_add_gap``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import faust
import pytest
from faust.types import TP
from faust.types.tuples import ConsumerMessage

from stream_app.app import App
from stream_app.checkpointing.consumer import Consumer

TOPIC = "inputs"
tp = TP(TOPIC, 0)


@pytest.fixture
def consumer() -> Iterator[Consumer]:
    app: faust.App = App("test-consumer", broker="kafka://127.0.0.1:9", store="memory://")
    app.topics._acking_topics.add(TOPIC)  # as for a topic an agent consumes
    app.consumer_generation_id = 1
    yield app.consumer  # type: ignore[misc]


def message(offset: int, generation: int = 1) -> ConsumerMessage:
    return ConsumerMessage(
        TOPIC, 0, offset, 0.0, 0, [], b"k", b"v", None, 1, 1, tp=tp, generation_id=generation
    )


def done(consumer: Consumer, *offsets: int, generation: int = 1) -> None:
    for offset in offsets:
        m = message(offset, generation)
        consumer.applied(m)
        consumer.ack(m)


def test_an_event_acknowledged_without_being_applied_holds_the_commit(consumer: Consumer) -> None:
    # faust-streaming #216/#221: a stream acknowledges the events it skips (during a
    # rebalance, or fetched before one); committing past them loses them.
    consumer._committed_offset[tp] = 10
    consumer.ack(message(10))  # skipped, never applied
    done(consumer, 11, 12)
    assert consumer._new_offset(tp) is None
    done(consumer, 10)  # fetched again after the seek back, and applied
    assert consumer._new_offset(tp) == 13


def test_an_event_of_an_earlier_generation_does_not_count(consumer: Consumer) -> None:
    consumer._committed_offset[tp] = 10
    done(consumer, 10, generation=0)
    assert consumer._new_offset(tp) is None


def test_an_offset_missing_right_after_the_committed_one_holds_the_commit(
    consumer: Consumer,
) -> None:
    # faust-streaming #312: Faust saw a gap at the head only when two offsets were missing.
    consumer._committed_offset[tp] = 10
    done(consumer, 11, 12)
    assert consumer._new_offset(tp) is None


def test_with_nothing_committed_no_run_is_guessed_to_start_the_partition(
    consumer: Consumer,
) -> None:
    done(consumer, 5, 6)
    assert consumer._new_offset(tp) is None
    consumer._committed_offset[tp] = 5  # where the partition starts, once known
    assert consumer._new_offset(tp) == 7


def test_a_gap_ends_before_the_event_that_revealed_it(consumer: Consumer) -> None:
    consumer._committed_offset[tp] = 11
    # Fetched 13 right after 10: offsets 11 and 12 do not exist (compaction, markers).
    asyncio.run(consumer._add_gap(tp, 11, 13))
    assert consumer._new_offset(tp) == 13  # not past 13, which is not applied yet
    consumer._committed_offset[tp] = 13  # as the commit of that offset does
    done(consumer, 13)
    assert consumer._new_offset(tp) == 14

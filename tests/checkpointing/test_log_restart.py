"""R14 of ``checkpointing/consumer.py``: a partition whose log ends below the offset it
expects (its topic made again) is read again from the start of its log.

The drain loop is driven with scripted fetches, as in ``test_consumer.py``; the broker's
answers (a fetch's high watermark, ListOffsets' start and end) are the test's. The broker
test is ``tests/test_log_restart.py``."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.errors import UnknownTopicOrPartitionError
from faust.types import TP

from stream_app.checkpointing import consumer as module
from stream_app.checkpointing.consumer import Consumer, PartitionEndUnknown
from stream_app.observability import metrics
from tests.checkpointing.test_consumer import (
    TOPIC,
    Fetches,
    done,
    drain,
    message,
    new_consumer,
    tp,
)

OLD_POSITION = 600  # where the old log was read and committed up to: beyond the new log's end


@pytest.fixture
def consumer() -> Consumer:
    """The consumer of ``tp``, at the old log's position."""
    consumer = new_consumer("test-log-restart")
    consumer._committed_offset[tp] = OLD_POSITION
    consumer._next[tp] = OLD_POSITION
    return consumer


class Broker:
    """What the broker answers about ``tp``: the last fetch's high watermark, and
    ListOffsets' start and end of its log (an exception: the broker's error)."""

    def __init__(
        self,
        consumer: Consumer,
        monkeypatch: pytest.MonkeyPatch,
        highwater: int | None,
        start: int,
        end: int | BaseException,
    ) -> None:
        self.highwater, self.start, self.end = highwater, start, end
        self.asked = 0
        self.crashed: list[BaseException] = []
        monkeypatch.setattr(consumer, "highwater", lambda _: self.highwater)
        monkeypatch.setattr(consumer, "highwaters", self.highwaters)
        monkeypatch.setattr(consumer, "earliest_offsets", self.earliest_offsets)
        monkeypatch.setattr(consumer, "assignment", lambda: {tp})
        monkeypatch.setattr(consumer.app, "crash", self.crash)

    async def highwaters(self, *partitions: TP) -> dict[TP, int]:
        self.asked += 1
        if isinstance(self.end, BaseException):
            raise self.end
        return dict.fromkeys(partitions, self.end)

    async def earliest_offsets(self, *partitions: TP) -> dict[TP, int]:
        return dict.fromkeys(partitions, self.start)

    async def crash(self, reason: BaseException) -> None:
        self.crashed.append(reason)


def restarts() -> float:
    counted = metrics.REGISTRY.get_sample_value(
        "stream_app_partitions_restarted_total", {"topic": TOPIC}
    )
    return counted or 0.0


def test_a_read_from_the_start_of_a_log_made_again_is_delivered_not_dropped(
    consumer: Consumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Apache Kafka answers a fetch beyond the end with OFFSET_OUT_OF_RANGE, and aiokafka
    # (auto_offset_reset "earliest", Faust's setting) reads the partition from its start:
    # R1 took 0, 1, 2 for records delivered since the last seek and dropped them.
    Broker(consumer, monkeypatch, highwater=3, start=0, end=3)
    before = restarts()
    fetches = drain(consumer, [0, 1, 2], [0, 1, 2])
    assert fetches.sought == [0]  # read again from the start: 0-2 passed the position
    assert fetches.delivered == [0, 1, 2]
    assert consumer._committed_offset[tp] == 0  # a commit walks from the log's start (R3)
    done(consumer, 0, 1, 2)
    assert consumer._new_offset(tp) == 3
    assert restarts() == before + 1


def test_a_partition_that_fetches_nothing_beyond_its_end_is_read_from_its_start(
    consumer: Consumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # tansu answers a fetch beyond the end with no records and the partition's high
    # watermark: the partition waited, silent, until the new log reached the old position.
    Broker(consumer, monkeypatch, highwater=3, start=0, end=3)
    fetches = drain(consumer, [], [0, 1, 2])
    assert fetches.sought == [0]
    assert fetches.delivered == [0, 1, 2]
    assert consumer.rereading() == 0  # read up to where the log ended when found
    assert consumer._next[tp] == 3


def test_while_a_log_made_again_is_read_up_to_its_end_it_is_counted_as_rereading(
    consumer: Consumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    Broker(consumer, monkeypatch, highwater=5, start=0, end=5)
    fetches = drain(consumer, [], [0, 1, 2])
    assert fetches.delivered == [0, 1, 2]
    assert consumer.rereading() == 1  # 3 and 4 still to come
    done(consumer, 0, 1, 2)
    assert consumer._new_offset(tp) == 3


def test_an_old_logs_event_acknowledged_after_the_restart_does_not_count(
    consumer: Consumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An event of the old log, delivered before the restart and applied after it, has an
    # offset of the new log too: counted, it would carry a commit past a record of the new
    # log that was never applied.
    consumer._committed_offset[tp] = 0
    in_flight = message(1)
    consumer.track_message(in_flight)  # delivered (Faust tracks each event it delivers)
    Broker(consumer, monkeypatch, highwater=3, start=0, end=3)
    fetches = drain(consumer, [0, 1, 2], [0])
    assert fetches.delivered == [0]
    assert not consumer.ack_applied(in_flight)
    done(consumer, 0)
    assert consumer._new_offset(tp) == 1  # not 2: the new log's 1 is not applied


def test_a_commit_under_way_lands_before_the_restart_not_after_it(
    consumer: Consumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # aiokafka retries a commit refused as UnknownTopicOrPartition until the topic is back;
    # Faust then records the offset it committed. Recorded after the restart, it would
    # hold the commit until the new log reached the old position.
    consumer._committed_offset[tp] = 590
    Broker(consumer, monkeypatch, highwater=3, start=0, end=3)

    fetches = Fetches(consumer, [], [0])

    async def a_commit_under_way_while_the_partition_is_found() -> None:
        async def commit() -> None:
            await asyncio.sleep(0.05)
            consumer._committed_offset[tp] = OLD_POSITION  # Faust records the offset committed

        under_way = asyncio.create_task(commit())

        async def wait_for_it() -> bool:
            await under_way
            return True

        monkeypatch.setattr(consumer, "maybe_wait_for_commit_to_finish", wait_for_it)
        await consumer._drain_messages(fetches)  # type: ignore[arg-type]
        await under_way

    asyncio.run(a_commit_under_way_while_the_partition_is_found())
    assert consumer._committed_offset[tp] == 0
    done(consumer, 0)
    assert consumer._new_offset(tp) == 1


def test_a_high_watermark_below_the_expectation_is_not_enough(
    consumer: Consumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A new leader's high watermark may lag for a moment; the broker's log end decides.
    broker = Broker(consumer, monkeypatch, highwater=3, start=0, end=700)
    fetches = drain(consumer, [], [598, 599])
    assert broker.asked >= 1
    assert fetches.sought == [] and fetches.delivered == []
    assert consumer._next[tp] == consumer._committed_offset[tp] == OLD_POSITION
    assert broker.crashed == []


def test_a_broker_that_cannot_say_where_the_log_ends_stops_the_worker(
    consumer: Consumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fetches keep answering a high watermark below the position while ListOffsets says
    # the log reaches it: whether records were skipped cannot be told. Stop, loud.
    monkeypatch.setattr(module, "PARTITION_END_PATIENCE_S", 0.0)
    broker = Broker(consumer, monkeypatch, highwater=3, start=0, end=700)
    drain(consumer, [], [])
    (reason,) = broker.crashed
    assert isinstance(reason, PartitionEndUnknown)
    assert f"{TOPIC}:0" in str(reason) and str(OLD_POSITION) in str(reason)


def test_a_contradiction_that_passed_does_not_count_towards_a_later_one(
    consumer: Consumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setattr(module, "time", clock)
    broker = Broker(consumer, monkeypatch, highwater=3, start=0, end=700)
    asyncio.run(consumer._drain_messages(Fetches(consumer, [])))  # type: ignore[arg-type]
    clock.now, broker.highwater = 10.0, 700  # the leader caught up
    asyncio.run(consumer._drain_messages(Fetches(consumer, [])))  # type: ignore[arg-type]
    clock.now, broker.highwater = 100.0, 3  # another lag, long after
    asyncio.run(consumer._drain_messages(Fetches(consumer, [])))  # type: ignore[arg-type]
    assert broker.asked == 2 and broker.crashed == []
    clock.now = 100.0 + module.PARTITION_END_PATIENCE_S
    asyncio.run(consumer._drain_messages(Fetches(consumer, [])))  # type: ignore[arg-type]
    assert len(broker.crashed) == 1


class Clock:
    """``time`` for the consumer module: a monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


def test_a_partition_whose_topic_is_gone_is_left_alone_until_it_is_back(
    consumer: Consumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = Broker(consumer, monkeypatch, highwater=3, start=0, end=UnknownTopicOrPartitionError())
    fetches = drain(consumer, [], [])
    assert fetches.sought == [] and broker.crashed == []
    assert consumer._next[tp] == OLD_POSITION

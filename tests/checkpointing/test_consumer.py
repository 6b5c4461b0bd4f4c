"""The holes closed in Faust's commit bookkeeping (``checkpointing/consumer.py``).

Each test drives the real Faust consumer of this app (no broker is needed to count acks)
and fails with Faust's own ``ack`` / ``_new_offset`` / ``_add_gap`` (replaced here by
``_mark_absent``, rule R4). The rules the tests name are those of ``consumer.py``'s docstring.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
from collections.abc import AsyncIterator, Iterator
from types import SimpleNamespace
from typing import Any, NamedTuple

import faust
import pytest
from aiokafka.consumer.fetcher import Fetcher, FetchResult
from aiokafka.errors import IllegalStateError
from faust.tables.recovery import Recovery
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP
from faust.types.tuples import ConsumerMessage
from mode.utils.queues import FlowControlQueue

from stream_app.checkpointing.consumer import (
    FETCH_SHARE,
    RUN_RECORDS,
    Consumer,
    ConsumerThread,
    RunScheduler,
    Transport,
)
from stream_app.state.recovery import FetchEndTableManager
from tests.event_loop import beside_another_task, slices_of_nothing

TOPIC = "inputs"
tp = TP(TOPIC, 0)


class App(faust.App):
    """Faust's app with this app's consumer, as ``stream_app.app.App`` makes it; that module
    reads the settings and declares the worker's topics when it is imported."""

    def _new_transport(self) -> Transport:
        return Transport(self.conf.broker_consumer, self)


def new_consumer(app_id: str) -> Consumer:
    """The consumer of a new app named ``app_id``, no broker behind it, that acks ``TOPIC``."""
    app: faust.App = App(app_id, broker="kafka://127.0.0.1:9", store="memory://")
    app.topics._acking_topics.add(TOPIC)  # as for a topic an agent consumes
    app.consumer_generation_id = 1
    return app.consumer  # type: ignore[return-value]


@pytest.fixture
def consumer() -> Consumer:
    return new_consumer("test-consumer")


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


def test_the_agents_own_acknowledgement_counts_in_its_generation_only(
    consumer: Consumer,
) -> None:
    # ack_applied is applied and ack in one step (the checkpoints' 4b): the same R2.
    consumer._committed_offset[tp] = 10
    assert not consumer.ack_applied(message(10, generation=0))  # fetched before a rebalance
    assert consumer._new_offset(tp) is None
    assert consumer.ack_applied(message(10))
    consumer.ack(message(11))  # Faust's own, of an event the agent never applied: refused
    assert consumer._new_offset(tp) == 11


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
    consumer._mark_absent(tp, 11, 13)
    assert consumer._new_offset(tp) == 13  # not past 13, which is not applied yet
    consumer._committed_offset[tp] = 13  # as the commit of that offset does
    done(consumer, 13)
    assert consumer._new_offset(tp) == 14


class Fetches:
    """Scripted fetches for the drain loop: what reached it, what it delivered and sought."""

    def __init__(self, consumer: Consumer, *batches: list[int]) -> None:
        self.consumer = consumer
        self.batches = list(batches)
        self.delivered: list[int] = []
        self.runs: list[list[int]] = []  # what each delivery carried
        self.sought: list[int] = []
        self.should_stop = False  # the fetcher service's flag, read by the loop
        consumer.getmany = self.getmany  # type: ignore[method-assign]
        consumer.seek = self.seek  # type: ignore[method-assign]
        consumer.callback = self.deliver  # type: ignore[method-assign]
        consumer.app.flow_control.resume()
        consumer.streams_resumed(consumer.app.consumer_generation_id)  # recovery is done

    async def getmany(self, timeout: float) -> AsyncIterator[tuple[TP, ConsumerMessage]]:
        if not self.batches:
            self.should_stop = True
            return
        for offset in self.batches.pop(0):
            yield tp, message(offset)

    async def seek(self, partition: TP, offset: int) -> None:
        self.sought.append(offset)

    async def deliver(self, m: ConsumerMessage) -> None:
        run = [each.offset for each in self.consumer.delivered(m)]
        self.runs.append(run)
        self.delivered.extend(run)


def drain(consumer: Consumer, *batches: list[int]) -> Fetches:
    fetches = Fetches(consumer, *batches)
    asyncio.run(consumer._drain_messages(fetches))  # type: ignore[arg-type]
    return fetches


def test_a_fetch_from_before_a_seek_is_not_delivered_ahead_of_the_sought_offset(
    consumer: Consumer,
) -> None:
    # A fetch in flight while Faust seeks to the committed offsets (after recovery, or
    # "exception performing seek when flow not active") delivered records from the old
    # position first; the records from the committed offset, read next, were then dropped
    # as read before (faust-streaming's drain loop), or applied after later ones: the
    # core took them for duplicates and a session lost them.
    consumer._next[tp] = 600  # as seeking to the committed offset 600 leaves it
    fetches = drain(consumer, [700, 701], [600, 601, 602])
    assert fetches.sought == [600]
    assert fetches.delivered == [600, 601, 602]


def test_offsets_missing_from_a_fresh_read_are_a_gap_and_delivery_goes_on(
    consumer: Consumer,
) -> None:
    consumer._committed_offset[tp] = 10
    consumer._next[tp] = 10
    fetches = drain(consumer, [12, 13], [12, 13])  # read again from 10: 10 and 11 are gone
    assert fetches.sought == [10]
    assert fetches.delivered == [12, 13]
    done(consumer, 12, 13)
    assert consumer._new_offset(tp) == 14


def test_consecutive_records_of_a_partition_are_delivered_as_one_run(consumer: Consumer) -> None:
    # Faust's path per event (conductor, channel, stream, a turn of the event loop) cost
    # more than the core's work per record; a run pays it once.
    consumer._next[tp] = 10
    fetches = drain(consumer, [10, 11, 12], [13])
    assert fetches.runs == [[10, 11, 12], [13]]
    assert consumer._next[tp] == 14


def test_a_gap_inside_a_fetch_ends_the_run_before_it(consumer: Consumer) -> None:
    consumer._committed_offset[tp] = 10
    consumer._next[tp] = 10
    fetches = drain(consumer, [10, 11, 13, 14], [13, 14])  # 12 is gone: read again from 12
    assert fetches.runs == [[10, 11], [13, 14]]
    assert fetches.sought == [12]


def test_a_run_holds_at_most_run_records(consumer: Consumer) -> None:
    consumer._next[tp] = 0
    fetches = drain(consumer, list(range(RUN_RECORDS + 5)))
    assert [len(run) for run in fetches.runs] == [RUN_RECORDS, 5]
    assert fetches.delivered == list(range(RUN_RECORDS + 5))


def test_a_run_is_forgotten_with_its_first_record(consumer: Consumer) -> None:
    # A run dropped with the agent's queue (a rebalance) must not stay in memory.
    consumer._next[tp] = 0
    fetches = drain(consumer, [0, 1, 2])
    assert fetches.runs == [[0, 1, 2]]
    gc.collect()
    assert len(consumer._runs) == 0


def test_the_scheduler_takes_a_run_of_each_partition_in_turn() -> None:
    other = TP(TOPIC, 1)
    records = {tp: list(range(RUN_RECORDS + 2)), other: ["a", "b"]}
    order = list(RunScheduler().iterate(records))
    assert order == [
        *[(tp, n) for n in range(RUN_RECORDS)],
        (other, "a"),
        (other, "b"),
        (tp, RUN_RECORDS),
        (tp, RUN_RECORDS + 1),
    ]


def test_a_delivery_that_outlives_a_seek_to_the_committed_offsets_leaves_their_order(
    consumer: Consumer,
) -> None:
    consumer._next[tp] = 5
    fetches = Fetches(consumer, [5])

    async def deliver_across_a_rebalance(m: ConsumerMessage) -> None:
        fetches.delivered.append(m.offset)
        consumer._seeks += 1  # what perform_seek does meanwhile
        consumer._next[tp] = 3

    consumer.callback = deliver_across_a_rebalance  # type: ignore[method-assign]
    asyncio.run(consumer._drain_messages(fetches))  # type: ignore[arg-type]
    assert consumer._next[tp] == 3


def test_nothing_is_delivered_while_the_consumer_flow_is_stopped(consumer: Consumer) -> None:
    fetches = Fetches(consumer, [5, 6])
    consumer.stop_flow()  # a rebalance has begun
    consumer._next[tp] = 5
    asyncio.run(consumer._drain_messages(fetches))  # type: ignore[arg-type]
    assert fetches.delivered == []
    assert consumer._next[tp] == 5


def test_a_changelog_record_is_delivered_as_faust_delivers_it(consumer: Consumer) -> None:
    # A standby's changelog records are not an agent's source: dropping one while the
    # streams' flow control was paused (recovery) and applying the next lost it, because
    # the standby's persisted offset moved past it (turn bodies went missing after a
    # partition moved).
    changelog = TP("app-sessions-changelog", 0)
    fetches = Fetches(consumer)
    consumer.app.flow_control.suspend()

    async def getmany(timeout: float) -> AsyncIterator[tuple[TP, ConsumerMessage]]:
        if fetches.should_stop:
            return
        fetches.should_stop = True
        for offset in (7, 8):
            yield (
                changelog,
                ConsumerMessage(
                    changelog.topic, 0, offset, 0.0, 0, [], b"k", b"v", None, 1, 1, tp=changelog
                ),
            )

    consumer.getmany = getmany  # type: ignore[method-assign]
    # Faust's wait_first runs its tasks on the consumer's own event loop.
    consumer.loop.run_until_complete(consumer._drain_messages(fetches))  # type: ignore[arg-type]
    assert fetches.delivered == [7, 8]


def test_a_new_assignment_delivers_again_what_an_earlier_generation_delivered(
    consumer: Consumer,
) -> None:
    # Records delivered before a rebalance were dropped by the stream (their generation),
    # and the new assignment reads them again from the committed offset, before the seek
    # after recovery: taken for read, they were never applied, and a later record was.
    consumer._committed_offset[tp] = 958
    consumer._next[tp] = 1002
    consumer.stop_flow()  # the rebalance
    consumer.resume_flow()  # recovery done, before its seek
    fetches = drain(consumer, [958, 959, 960])
    assert fetches.delivered == [958, 959, 960]


def test_after_a_rebalance_a_read_past_the_last_known_commit_is_sought_back_to_it(
    consumer: Consumer,
) -> None:
    # A partition that moved away and back: another worker committed further, but what
    # lies between may not be in this worker's state; reading it twice is safe, skipping not.
    consumer._committed_offset[tp] = 958
    consumer._next[tp] = 1002
    consumer.stop_flow()
    consumer.resume_flow()
    fetches = drain(consumer, [1100, 1101], [958, 959])
    assert fetches.sought == [958]
    assert fetches.delivered == [958, 959]


def test_a_seek_to_the_committed_offsets_that_fails_leaves_them_expected(
    consumer: Consumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "exception performing seek when flow not active" (faust-streaming #264): the fetch
    # position stays where it was, past records the stream dropped.
    async def no_assignment(self: Consumer) -> None:
        raise IllegalStateError("No current assignment")

    monkeypatch.setattr(faust_aiokafka.Consumer, "perform_seek", no_assignment)
    consumer._committed_offset[tp] = 958
    consumer._next[tp] = 1002
    with pytest.raises(IllegalStateError):
        asyncio.run(consumer.perform_seek())
    fetches = drain(consumer, [1002, 1003], [958])
    assert fetches.sought == [958]
    assert fetches.delivered == [958]


def test_a_commit_that_does_not_go_through_strands_no_acknowledged_offset(
    consumer: Consumer,
) -> None:
    # The committed offset was learnt late (a seek that spanned the assignment took a moved
    # partition for uncommitted: 0); the commit from there never went through, and the run
    # it had walked was dropped, so once the real committed offset (801) was known no run
    # started at it: that partition never committed again (faust-streaming #596's symptom).
    consumer._committed_offset[tp] = 0
    done(consumer, *range(0, 900))
    assert consumer._new_offset(tp) == 900  # the commit of 900 fails
    consumer._committed_offset[tp] = 801
    assert consumer._new_offset(tp) == 900
    assert len(consumer._acked[tp]) == 900 - 801  # what the committed offset covers goes


def test_nothing_is_delivered_before_recovery_resumes_the_streams(consumer: Consumer) -> None:
    # faust-streaming #596: recovery resumes the consumer's flow to read the changelogs,
    # seeks the stream partitions and only then resumes the app's flow control, which
    # empties every agent's queue. A partition's backlog delivered in between was dropped
    # with the queue, its offsets counted as delivered, and never read again.
    queue: FlowControlQueue[list[int]] = FlowControlQueue(
        flow_control=consumer.app.flow_control, clear_on_resume=True
    )
    consumer._next[tp] = 5
    fetches = Fetches(consumer, [5, 6], [5, 6])
    consumer._resumed = None  # a new generation, its recovery under way

    async def into_the_agents_queue(m: ConsumerMessage) -> None:
        queue.put_nowait([each.offset for each in consumer.delivered(m)])

    async def recovery_resumes_the_streams_after_the_first_fetch(
        timeout: float,
    ) -> AsyncIterator[tuple[TP, ConsumerMessage]]:
        if fetches.batches and len(fetches.batches) == 1:
            consumer.app.flow_control.resume()  # empties the queue
            consumer.streams_resumed(consumer.app.consumer_generation_id)
        async for item in Fetches.getmany(fetches, timeout):
            yield item

    consumer.callback = into_the_agents_queue  # type: ignore[method-assign]
    consumer.getmany = recovery_resumes_the_streams_after_the_first_fetch  # type: ignore[method-assign]
    asyncio.run(consumer._drain_messages(fetches))  # type: ignore[arg-type]
    assert [queue.get_nowait() for _ in range(queue.qsize())] == [[5, 6]]


def test_a_seek_that_spans_an_assignment_takes_no_commit_of_a_new_partition_for_none(
    consumer: Consumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Seeking to the committed offsets asks the broker partition by partition; a partition
    # assigned meanwhile was counted as never committed and expected from its start.
    moved = TP(TOPIC, 1)

    async def seek_to_committed(self: Consumer) -> dict[TP, int]:
        return {tp: 958}

    async def earliest_offsets(*partitions: TP) -> dict[TP, int]:
        return dict.fromkeys(partitions, 0)

    monkeypatch.setattr(faust_aiokafka.Consumer, "seek_to_committed", seek_to_committed)
    monkeypatch.setattr(consumer, "assignment", lambda: {tp, moved})
    monkeypatch.setattr(consumer, "earliest_offsets", earliest_offsets)
    asyncio.run(consumer.perform_seek())
    assert consumer._committed_offset[tp] == 958
    assert consumer._committed_offset.get(moved) is None
    assert consumer._next == {tp: 958}


@pytest.mark.parametrize("step", ["on_recovery_completed", "_resume_streams"])
def test_recovery_tells_the_consumer_once_it_has_resumed_the_streams(
    step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    app: faust.App = App(
        "test-recovery", broker="kafka://127.0.0.1:9", TableManager=FetchEndTableManager
    )
    consumer: Consumer = app.consumer  # type: ignore[assignment]
    app.consumer_generation_id = 3
    seen: list[int | None] = []

    async def faust_step(self: Recovery, generation_id: int = 0) -> None:
        seen.append(consumer._resumed)  # still delivering nothing: the queues are emptied
        app.flow_control.resume()

    monkeypatch.setattr(Recovery, step, faust_step)
    recovery = app.tables.recovery  # type: ignore[attr-defined]
    standby = TP("test-recovery-sessions-changelog", 2)
    recovery.standby_tps.add(standby)
    recovery.standby_offsets[standby] = 41  # the offset its table has reached
    app.topics._acking_topics.add(TOPIC)  # an agent's source
    consumer._next[tp] = 830  # its committed offset, as recovery's seek expects it
    sought: list[tuple[TP, int, int | None]] = []

    async def seek(partition: TP, offset: int) -> None:
        sought.append((partition, offset, consumer._resumed))

    monkeypatch.setattr(consumer, "seek", seek)
    asyncio.run(getattr(recovery, step)(generation_id=3))
    assert seen == [None]
    # What was held back meanwhile is read again, before anything is delivered: a restarted
    # worker fetched a partition's whole backlog while recovery ran, and with nothing newer
    # to fetch never came back to it.
    assert sought == [(tp, 830, None), (standby, 41, None)]
    assert consumer._resumed == 3


def test_a_standbys_changelog_record_waits_until_recovery_has_resumed_the_streams(
    consumer: Consumer,
) -> None:
    # Recovery resumes the standby partitions and then the app's flow control, which
    # empties the changelog queue: a standby's records delivered in between were lost, the
    # standby applied the next ones, and the worker it handed its partitions to found
    # states naming turn bodies it never read (the scale test, one round in 21).
    standby = TP("app-turn_bodies-changelog", 2)
    consumer.app.tables.recovery.standby_tps.add(standby)  # type: ignore[attr-defined]
    fetches = Fetches(consumer)
    consumer._resumed = None

    async def getmany(timeout: float) -> AsyncIterator[tuple[TP, ConsumerMessage]]:
        if fetches.should_stop:
            return
        fetches.should_stop = True
        yield (
            standby,
            ConsumerMessage(standby.topic, 2, 7, 0.0, 0, [], b"k", b"v", None, 1, 1, tp=standby),
        )

    consumer.getmany = getmany  # type: ignore[method-assign]
    consumer.loop.run_until_complete(consumer._drain_messages(fetches))  # type: ignore[arg-type]
    assert fetches.delivered == []


class StandbyTable:
    """A standby's table: what was applied to it, fetch by fetch."""

    def __init__(self) -> None:
        self.applied: list[list[int]] = []

    def apply_standby(self, records: list[ConsumerMessage]) -> None:
        self.applied.append([record.offset for record in records])


def standby_fetches(
    consumer: Consumer, offsets: list[int], held: int | None, rebalance_after: int | None = None
) -> tuple[Fetches, StandbyTable]:
    """One fetch of a standby partition whose table has reached ``held``; a rebalance begins
    after the record at ``rebalance_after``, if any."""
    standby = TP("app-sessions-changelog", 1)
    recovery = consumer.app.tables.recovery  # type: ignore[attr-defined]
    table = StandbyTable()
    recovery.standby_tps.add(standby)
    recovery.tp_to_table[standby] = table
    recovery.standby_offsets[standby] = held
    fetches = Fetches(consumer)

    async def getmany(timeout: float) -> AsyncIterator[tuple[TP, ConsumerMessage]]:
        if fetches.should_stop:
            return
        fetches.should_stop = True
        for offset in offsets:
            yield (
                standby,
                ConsumerMessage(
                    standby.topic, 1, offset, 0.0, 0, [], b"k", b"v", None, 1, 1, tp=standby
                ),
            )
            if offset == rebalance_after:
                consumer.app.consumer_generation_id += 1

    consumer.getmany = getmany  # type: ignore[method-assign]
    consumer.loop.run_until_complete(consumer._drain_messages(fetches))  # type: ignore[arg-type]
    return fetches, table


def test_a_standbys_records_of_a_fetch_are_applied_at_once_past_the_offset_its_table_holds(
    consumer: Consumer,
) -> None:
    # Faust takes a standby's every record through its conductor, a queue and recovery's
    # loop: two workers keeping standbys of each other's partitions took twice the CPU of
    # two without (R13).
    fetches, table = standby_fetches(consumer, [6, 7, 8, 9], held=7)
    standby = TP("app-sessions-changelog", 1)
    assert table.applied == [[8, 9]]
    assert fetches.delivered == []  # not through Faust's path
    assert consumer.app.tables.recovery.standby_offsets[standby] == 9  # type: ignore[attr-defined]
    assert consumer._read_offset[standby] == 9


def test_a_standbys_records_of_a_fetch_are_applied_a_lot_at_a_time(
    consumer: Consumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fetch's thousands of a peer's checkpoint, applied in one step, held the loop of a
    # worker keeping standbys 37-43 ms. Each lot notes its last offset, so a rebalance
    # between two leaves the table where R6 reads on from.
    import stream_app.checkpointing.consumer as module

    monkeypatch.setattr(module, "STANDBY_RECORDS", 2)
    slices_of_nothing(monkeypatch, module)
    standby = TP("app-sessions-changelog", 1)
    recovery = consumer.app.tables.recovery  # type: ignore[attr-defined]
    _, table = standby_fetches(consumer, [6, 7, 8, 9, 10], held=5)
    assert table.applied == [[6, 7], [8, 9], [10]]
    assert recovery.standby_offsets[standby] == 10

    _, table = standby_fetches(consumer, [11, 12, 13, 14, 15], held=10, rebalance_after=13)
    assert table.applied == [[11, 12]]  # the lots after the rebalance are read again
    assert recovery.standby_offsets[standby] == 12


def test_a_standbys_records_fetched_before_a_rebalance_are_not_applied(
    consumer: Consumer,
) -> None:
    # Applied after the rebalance, they could land past records that R6's read again of
    # the partition has not reached: none of them is, and R6 reads them all again.
    _, table = standby_fetches(consumer, [8, 9], held=7, rebalance_after=8)
    standby = TP("app-sessions-changelog", 1)
    assert table.applied == []
    assert consumer.app.tables.recovery.standby_offsets[standby] == 7  # type: ignore[attr-defined]


class StandbyLog:
    """A standby partition's changelog, read by the drain loop two records a fetch from a
    position that a fetch moves past what it returns and a seek sets; its table holds
    ``held``. The first fetch is begun while recovery is still under way, and recovery
    resumes the streams (R6 seeking the partition back to ``held`` first) while that fetch
    is in hand: before its records are read (``resume`` "before"), after they are read
    ("after": read from where earlier refused fetches had left the position), or once the
    record at offset ``resume`` is taken (the lot before it has been offered by then)."""

    def __init__(
        self, consumer: Consumer, log: range, position: int, held: int, resume: str | int
    ) -> None:
        self.consumer, self.log, self.position, self.held = consumer, log, position, held
        self.tp = TP("app-entries-changelog", 1)
        recovery = consumer.app.tables.recovery  # type: ignore[attr-defined]
        self.table = StandbyTable()
        recovery.standby_tps.add(self.tp)
        recovery.tp_to_table[self.tp] = self.table
        recovery.standby_offsets[self.tp] = held
        self.sought: list[int] = []
        self.fetches = 0
        self.done = Fetches(consumer)
        consumer.seek = self.seek  # type: ignore[method-assign]
        consumer.getmany = self.getmany  # type: ignore[method-assign]
        consumer._resumed = None  # recovery of this generation under way
        self.resume = resume

    async def seek(self, partition: TP, offset: int) -> None:
        self.sought.append(offset)
        self.position = offset

    async def resumed(self) -> None:
        await self.consumer.read_again({self.tp: self.held})  # R6
        self.consumer.streams_resumed(self.consumer.app.consumer_generation_id)

    def read(self) -> list[int]:
        records = [o for o in self.log if o >= self.position][:2]
        self.position = records[-1] + 1 if records else self.position
        return records

    async def getmany(self, timeout: float) -> AsyncIterator[tuple[TP, ConsumerMessage]]:
        self.fetches += 1
        first = self.fetches == 1
        if first and self.resume == "before":
            await self.resumed()
        records = self.read()
        if first and self.resume == "after":
            await self.resumed()
        if not records and not first:
            self.done.should_stop = True
        for offset in records:
            yield (
                self.tp,
                ConsumerMessage(
                    self.tp.topic, 1, offset, 0.0, 0, [], b"k", b"v", None, 1, 1, tp=self.tp
                ),
            )
            if first and offset == self.resume:
                await self.resumed()

    def drain(self) -> list[int]:
        """The offsets applied to the table, in order."""
        self.consumer.loop.run_until_complete(
            self.consumer._drain_messages(self.done)  # type: ignore[arg-type]
        )
        return [offset for lot in self.table.applied for offset in lot]


def test_a_standbys_fetch_that_recovery_resumes_the_streams_during_is_not_applied(
    consumer: Consumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 44 item 5: the first lot of a fetch was refused (recovery not done), recovery
    # resumed the streams between two lots, and the next lot was applied: the table's
    # offset passed the refused records, which R6's read again then took for applied. The
    # worker the partition was handed to lacked their entries (a waiting decision gone).
    import stream_app.checkpointing.consumer as module

    monkeypatch.setattr(module, "STANDBY_RECORDS", 1)
    slices_of_nothing(monkeypatch, module)
    log = StandbyLog(consumer, range(6, 10), position=6, held=5, resume=7)
    assert log.drain() == [6, 7, 8, 9]  # not [7, 8, 9]


@pytest.mark.parametrize("resume", ["before", "after"])
def test_a_standbys_fetch_begun_before_it_was_sought_back_is_read_again(
    consumer: Consumer, resume: str
) -> None:
    # A fetch begun before R6 sought the partition back to its table's offset holds the
    # records that seek read again ("before": refused, for good, the table's offset then
    # passing them with the next fetch) or records from where the refused ones had left
    # the position ("after", 6-19 refused before it: applied past them). Refused, and the
    # partition is sought back to its table's offset, so the next fetches bring them.
    log = StandbyLog(
        consumer, range(6, 22), position=6 if resume == "before" else 20, held=5, resume=resume
    )
    assert log.drain() == list(range(6, 22))  # R6 seeks it back to 5, then the refusal


def test_a_partition_with_nothing_committed_is_delivered_from_the_start_of_its_log(
    consumer: Consumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With no expectation a partition took any offset first: records skipped while its
    # recovery was under way (read, not delivered) were passed over for good, and with no
    # committed offset no commit ever went through for it (the scale test, sessions:1).
    async def nothing_committed(self: Consumer) -> dict[TP, int | None]:
        return {tp: None}

    async def earliest_offsets(*partitions: TP) -> dict[TP, int]:
        return dict.fromkeys(partitions, 0)

    monkeypatch.setattr(faust_aiokafka.Consumer, "seek_to_committed", nothing_committed)
    monkeypatch.setattr(consumer, "assignment", lambda: {tp})
    monkeypatch.setattr(consumer, "earliest_offsets", earliest_offsets)
    consumer._acked[tp].append(3)  # acknowledged in an earlier generation, never committed
    asyncio.run(consumer.perform_seek())  # recovery's seek to the committed offsets
    fetches = Fetches(consumer, [0, 1], [5, 6], [0, 1, 2])
    consumer._resumed = None  # recovery under way: 0 and 1 are read and not delivered

    async def recovery_resumes_the_streams_after_the_first_fetch(
        timeout: float,
    ) -> AsyncIterator[tuple[TP, ConsumerMessage]]:
        if len(fetches.batches) == 2:
            consumer.streams_resumed(consumer.app.consumer_generation_id)
        async for item in Fetches.getmany(fetches, timeout):
            yield item

    consumer.getmany = recovery_resumes_the_streams_after_the_first_fetch  # type: ignore[method-assign]
    asyncio.run(consumer._drain_messages(fetches))  # type: ignore[arg-type]
    assert fetches.sought == [0]
    assert fetches.delivered == [0, 1, 2]
    assert consumer._committed_offset[tp] == 0  # a run of acknowledged offsets starts there
    done(consumer, 0, 1)
    assert consumer._new_offset(tp) == 2


class AIOKafkaConsumer:
    """Records the thread each seek ran in; a seek of an unassigned partition fails."""

    def __init__(self) -> None:
        self.seeks: list[tuple[int, int]] = []

    def seek(self, partition: TP, offset: int) -> None:
        if partition != tp:
            raise IllegalStateError(f"No current assignment for partition {partition}")
        self.seeks.append((offset, threading.get_ident()))


@pytest.fixture
def consumer_thread() -> Iterator[tuple[ConsumerThread, threading.Thread]]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    consumer_thread = ConsumerThread.__new__(ConsumerThread)  # only its seek is used
    consumer_thread.thread_loop = loop
    consumer_thread._consumer = AIOKafkaConsumer()  # type: ignore[assignment]
    yield consumer_thread, thread
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=10)
    loop.close()


def test_a_seek_runs_in_the_consumer_thread_and_is_done_when_it_returns(
    consumer_thread: tuple[ConsumerThread, threading.Thread],
) -> None:
    # Faust seeks aiokafka from the event loop's thread while the consumer thread reads its
    # fetched records: the fetcher crashed (KeyError in fetched_records, the scale test).
    # The caller must not await it either: the crash test lost decisions when it did.
    seeker, thread = consumer_thread
    aiokafka_consumer: AIOKafkaConsumer = seeker._consumer  # type: ignore[assignment]
    seeker.seek(tp, 5)
    assert aiokafka_consumer.seeks == [(5, thread.ident)]
    with pytest.raises(IllegalStateError):  # its errors reach the caller, as Faust's did
        seeker.seek(TP(TOPIC, 1), 7)


def test_the_drain_loop_gives_the_event_loop_back_between_two_runs_of_a_fetch(
    consumer: Consumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Faust makes each record of a fetch a message in the drain loop: a fetch of thousands
    # held the event loop 13-20 ms, with the agent, checkpoints and heartbeats waiting.
    import stream_app.checkpointing.consumer as module

    slices_of_nothing(monkeypatch, module)
    consumer._next[tp] = 0
    fetches = Fetches(consumer, list(range(3 * RUN_RECORDS)))
    seen: list[int] = []  # how many runs were delivered when another task ran
    drained = consumer._drain_messages(fetches)  # type: ignore[arg-type]
    asyncio.run(beside_another_task(drained, lambda: seen.append(len(fetches.runs))))
    assert len(fetches.runs) == 3
    assert 1 in seen and 2 in seen  # it ran after the first run, and after the second


class Record(NamedTuple):
    offset: int


class PartitionState:
    """aiokafka's TopicPartitionState, as its ``FetchResult`` reads and moves it."""

    paused = False

    def __init__(self, position: int) -> None:
        self.position = position

    def consumed_to(self, position: int) -> None:
        self.position = position


class Assignment:
    """aiokafka's Assignment, as its ``FetchResult`` reads it."""

    active = True

    def __init__(self, states: dict[TP, PartitionState]) -> None:
        self.states = states

    def state_value(self, partition: TP) -> PartitionState:
        return self.states[partition]


class Chunk:
    """aiokafka's PartitionRecords: one fetch response's records of a partition."""

    def __init__(self, offsets: range) -> None:
        self.records = iter([Record(offset) for offset in offsets])
        self.next_fetch_offset = offsets[0]

    def __iter__(self) -> Chunk:
        return self

    def __next__(self) -> Record:
        record = next(self.records)
        self.next_fetch_offset = record.offset + 1
        return record


class Subscriptions:
    reassignment_in_progress = False

    def __init__(self, states: dict[TP, PartitionState]) -> None:
        self.states = states

    def is_assigned(self, partition: TP) -> bool:
        return partition in self.states

    @contextlib.contextmanager
    def fetch_context(self) -> Iterator[None]:
        yield


class BufferedFetcher:
    """aiokafka's fetcher holding the chunks fetch responses brought, by partition in the
    order they arrived; ``fetched_records``, which hands them to Faust, is aiokafka's own."""

    fetched_records = Fetcher.fetched_records

    def __init__(self) -> None:
        self._records: dict[TP, FetchResult] = {}
        self._closed = False
        self._wait_consume_future = None
        self.states: dict[TP, PartitionState] = {}
        self._subscriptions = Subscriptions(self.states)

    def arrive(self, partition: TP, offsets: range) -> None:
        """A fetch response brings ``offsets`` of ``partition``, from its position."""
        self.states.setdefault(partition, PartitionState(offsets[0]))
        self._records[partition] = FetchResult(
            partition,
            assignment=Assignment(self.states),
            partition_records=Chunk(offsets),
            backoff=0,
        )

    def _notify(self, future: Any) -> None:
        pass  # the fetch routine that would ask the broker again: none here

    def _create_fetch_waiter(self) -> asyncio.Future[None]:
        return asyncio.get_running_loop().create_future()


def fetching(fetcher: BufferedFetcher) -> tuple[ConsumerThread, Any]:
    """The consumer thread, and the aiokafka consumer its fetches ask (Faust's
    ``_fetch_records`` reads these few of each)."""
    thread = ConsumerThread.__new__(ConsumerThread)  # only its fetch is used
    thread.consumer = SimpleNamespace(flow_active=True)  # type: ignore[assignment]
    return thread, SimpleNamespace(_fetcher=fetcher, _closed=False)


def test_a_chunk_fetched_a_moment_later_is_delivered_beside_an_earlier_one() -> None:
    # Issue 53: a worker taking over partition 2 after a kill was sought back (R6) to its
    # messages' committed offset (617), then to its decisions' (108). The messages' chunk
    # came first, all 1,792 records of a 1 MiB fetch, and Faust's fetch handed all of it
    # over at once; the drain loop delivered it before fetching again, so the decisions
    # came after. A session's seventh turn (message 2383) closed its first (MAX_OPEN_TURNS)
    # before that turn's decision (decision 275, published with message 1626) was
    # applied: the turn went final without it, though it had been published first.
    messages, decisions = TP("m", 2), TP("d", 2)
    fetcher = BufferedFetcher()
    thread, aiokafka_consumer = fetching(fetcher)
    fetcher.arrive(messages, range(617, 2409))
    delivered: list[tuple[str, int]] = []  # in the order the drain loop delivers runs (R8)
    loop = asyncio.new_event_loop()

    def fetch() -> None:
        got = loop.run_until_complete(
            thread._fetch_records(aiokafka_consumer, {messages, decisions}, timeout=0.01)
        )
        delivered.extend((tp.topic, r.offset) for tp, r in RunScheduler().iterate(got))

    fetch()  # the messages alone have arrived
    fetcher.arrive(decisions, range(108, 362))  # the decisions' chunk, a moment later
    while any(result.has_more() for result in fetcher._records.values()):
        fetch()
    loop.close()
    decision, message = delivered.index(("d", 275)), delivered.index(("m", 1626))
    assert decision < message, f"decision 275 delivered {decision}th, message 1626 {message}th"
    # Nothing lost or repeated, each partition in its order.
    assert [o for t, o in delivered if t == "m"] == list(range(617, 2409))
    assert [o for t, o in delivered if t == "d"] == list(range(108, 362))


def test_a_fetch_takes_a_share_of_each_partition_within_the_bound_on_the_whole() -> None:
    # R15: each partition with records buffered gives at most FETCH_SHARE to one fetch;
    # Faust's broker_max_poll_records, when set, still bounds the fetch.
    a, b, c = TP("a", 0), TP("b", 0), TP("c", 0)
    fetcher = BufferedFetcher()
    thread, aiokafka_consumer = fetching(fetcher)
    fetcher.arrive(a, range(0, 1000))
    fetcher.arrive(b, range(0, 30))
    loop = asyncio.new_event_loop()
    got = loop.run_until_complete(thread._fetch_records(aiokafka_consumer, {a, b, c}, 0.01))
    assert {tp.topic: len(records) for tp, records in got.items()} == {"a": FETCH_SHARE, "b": 30}
    got = loop.run_until_complete(
        thread._fetch_records(aiokafka_consumer, {a, b, c}, 0.01, FETCH_SHARE + 10)
    )
    assert {tp.topic: len(records) for tp, records in got.items()} == {"a": FETCH_SHARE}
    fetcher.arrive(b, range(30, 60))
    got = loop.run_until_complete(
        thread._fetch_records(aiokafka_consumer, {a, b, c}, 0.01, FETCH_SHARE + 10)
    )
    assert {tp.topic: len(records) for tp, records in got.items()} == {"a": FETCH_SHARE, "b": 10}
    loop.close()

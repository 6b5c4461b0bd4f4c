"""Faust's Kafka consumer with its at-least-once holes closed (SPEC §5).

A committed offset must be one whose record, and every record before it, the agent has
applied with its effects on the broker: a worker killed right after that commit loses
nothing. Faust's own bookkeeping can commit past a record no agent applied, and its drain
loop can hand an agent a partition's records out of order or with holes, which the core
(it applies a source record once, by offset) takes for duplicates. The rules below close
those holes; each method that overrides Faust or aiokafka cites the rules it keeps. What
each rule guards against, with the upstream issues, is in ``docs/internals.md`` ("The
consumer's rules"); the private names of Faust and aiokafka relied on here
are pinned, and checked against the installed versions, in ``pins.py``.

R1  Deliver exactly the expected offset, else seek back. Each partition an agent reads (an
    agent source: a topic whose events are acknowledged) delivers only the offset it
    expects next, and a delivery moves the expectation past what it delivered. An offset
    below it was delivered since the last seek and is dropped; an offset above it makes the
    partition be sought back to the expected offset, and the rest of that fetch of the
    partition is dropped as stale.
R2  An acknowledgement counts only for an event the agent has marked ``applied``, in the
    consumer generation it was fetched in. Every other is dropped: its partition is read
    again from the committed offset, and the event comes again.
R3  A commit walks from the committed offset: what may be committed is the end of the run
    of acknowledged or absent offsets that starts exactly there. Nothing known committed,
    nothing committed; acknowledged offsets are dropped only once the committed offset
    covers them, so a commit that does not go through strands nothing.
R4  Absent offsets end before the record that revealed them. When the read from a
    sought-back offset still starts above it, the offsets in between do not exist
    (transaction markers, compaction) and count as done; the record read is not done
    until it is applied.
R5  A rebalance, and every seek to the committed offsets, make each partition expect its
    last known committed offset; one the seek found uncommitted expects the start of its
    log, and one with no expectation at all (that seek failed) its committed offset, else
    the first offset read. What an earlier generation delivered is thus delivered again,
    never taken for read.
R6  Nothing is delivered in a generation until recovery has resumed its streams, nor while
    the consumer's flow is stopped; a standby's changelog records wait likewise. Recovery
    then reads each agent source partition again from its expected offset, and each
    standby partition from where its table stands.
R7  A delivery during which a rebalance or a seek to the committed offsets happened moves
    no expectation and no read offset: its stream drops it with its generation.
R8  Consecutive records of one partition (at most ``RUN_RECORDS``, no hole inside) are
    delivered as one event, the run's first record; the agent takes the run from
    ``delivered``. A run is accepted offset by offset under R1 and delivered before anything
    else is awaited, so a rebalance delivers, drops or re-reads it whole.
R9  Records of other topics (changelogs, replies) are delivered exactly as Faust does, a
    standby's aside (R13): a standby that skipped one and applied the next would persist an
    offset past it.
R10 Before a rebalance or a stop, every applied batch is settled (its effects written, its
    events acknowledged) before Faust waits for unacknowledged events: the consumer asks
    its ``settlement`` and waits for the answer of whoever acknowledges its events.
R11 A seek runs in the thread that owns the aiokafka consumer while its caller blocks, so
    nothing else runs on the event loop before it is done.
R12 The fetch wait is the app's setting (the app's ``fetch_max_wait_ms``), not Faust's
    fixed 1,500 ms: a broker holds a fetch up to that long when it has nothing new.
R13 A standby's changelog records are applied by the drain loop itself, a fetch's records
    of one partition ``STANDBY_RECORDS`` at a time, each lot at once, to its table's store
    (R9's path, Faust's, costs an event, two tasks, a queue and a ``wait_for`` a record):
    each above the offset recovery holds for the partition, in order, with that offset and
    the store's moved to the last. Only in the generation they were fetched in, with the
    flow going and recovery done (R6), and from a fetch begun after the partition was last
    sought back to its table's offset (R6's read again, or this rule's own); otherwise
    none of that lot nor of any after it in the fetch. R6 reads them again, or, once
    recovery is done, the partition is sought back to its table's offset at once: a fetch
    begun before a seek may hold records from past the table's offset, or hold, refused,
    the very records that seek read again. A standby's table thus holds every record of
    its changelog up to its offset, none skipped: the worker it is handed to reads on
    from there.
R14 A partition whose log ends below the offset it expects was made again (its topic deleted
    and created again): it is read again from the start of its log. Seen when a fetch's high
    watermark lies below the expectation, at a record below it (Apache Kafka answers a fetch
    beyond the end OFFSET_OUT_OF_RANGE, and aiokafka then reads the partition from its
    start: R1 dropped those records as delivered) and, for every partition, each
    ``PARTITION_END_CHECK_S`` or so (tansu answers such a fetch with nothing: the partition
    waited); decided by the broker's log end (ListOffsets), as a fetch's high watermark can
    lag behind for a moment. The expectation and the committed offset become the log's
    start, whatever was acknowledged or absent is dropped, and the events of the old log
    still under way count for nothing (R2). A commit under way is waited for first, so the
    old offset it records cannot land after. Logged once, counted, and counted as re-reading
    until the read reaches where that log ended. A broker whose log end keeps contradicting
    its fetches for ``PARTITION_END_PATIENCE_S`` stops the worker.
R15 A fetch hands the drain loop at most ``FETCH_SHARE`` records of each partition, every
    partition with records buffered taking its share in the same fetch; the rest stays in
    aiokafka's buffer for the next. Faust's fetch hands over a partition's chunk of a fetch
    response whole (up to ``max_partition_fetch_bytes``, 1 MiB: some 2,000 messages), and
    the drain loop delivers a fetch before it fetches again: a partition whose chunk
    arrived a moment later (a decisions partition, sought back by R6 just after its
    messages partition) waited for all of it. A session's turns were then applied hundreds
    of records ahead of its decisions, and a turn closed meanwhile (``max_open_turns``)
    never took the decision published before it: no dead letter, no error.
"""

from __future__ import annotations

import asyncio
import bisect
import concurrent.futures
import contextlib
import logging
import time
from collections.abc import Iterator, Mapping
from typing import ClassVar, TypeVar, cast
from weakref import WeakKeyDictionary, WeakSet

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import IllegalStateError, KafkaError
from aiokafka.structs import ConsumerRecord
from faust.exceptions import ConsumerNotStarted
from faust.tables.manager import TableManager
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.transport.utils import DefaultSchedulingStrategy
from faust.types import TP, Message
from mode import ServiceT

from stream_app.observability import logs, metrics
from stream_app.runtime.slices import Slices
from stream_app.state.tables import KeyPartitionedTable

_Record = TypeVar("_Record")  # a fetched record, as the fetcher gives it

# At most this many records of a partition delivered as one (R8). The agent applies a run
# without giving the event loop back, so a run is kept to about a slice (``runtime/slices.py``):
# longer runs add event-loop lag and no records a second (docs/benchmarks.md).
RUN_RECORDS = 25
# At most this many of a standby partition's records applied in one step (R13): a fetch of
# a peer's checkpoint brings thousands, which applied at once would hold the event loop
# (docs/benchmarks.md).
STANDBY_RECORDS = 500
# At most this many of a partition's fetched records in one fetch (R15): a few runs, so a
# partition whose records arrive a fetch later is delivered beside it, not after its whole
# chunk; enough that a backlog is not read a handful of records per fetch.
FETCH_SHARE = 4 * RUN_RECORDS
# How often (at most) the drain loop looks for partitions that expect an offset beyond their
# log's end (R14), and how long a broker may contradict itself about it before the worker
# stops rather than guess.
PARTITION_END_CHECK_S = 1.0
PARTITION_END_PATIENCE_S = 30.0


class PartitionEndUnknown(RuntimeError):
    """R14: whether a partition's log ends below the offset it expects cannot be told."""


class RunScheduler(DefaultSchedulingStrategy):
    """Faust's round robin between partitions, a run of records of one at a time (R8).

    Faust's own takes one record of each partition in turn, which leaves no run to deliver.
    """

    def iterate(self, records: Mapping[TP, list[_Record]]) -> Iterator[tuple[TP, _Record]]:
        """R8: up to ``RUN_RECORDS`` of each partition in turn, so a fetch yields whole
        runs and no partition waits for another's backlog."""
        start = 0
        while True:
            left = False
            for tp, batch in records.items():
                for record in batch[start : start + RUN_RECORDS]:
                    yield tp, record
                left = left or len(batch) > start + RUN_RECORDS
            if not left:
                return
            start += RUN_RECORDS


class ConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    """Faust's consumer thread, with the fetch wait of the app's settings (R12), its seeks
    made in the thread that owns the aiokafka consumer (R11), and its fetches sharing
    themselves between partitions (R15)."""

    #: The aiokafka consumer's fetch wait in ms (R12) when the app names none.
    fetch_max_wait_ms: ClassVar[int] = 500
    #: How long a seek may wait for the consumer thread before it raises (R11).
    seek_timeout_s: ClassVar[float] = 30.0

    def _create_worker_consumer(self, transport: faust_aiokafka.Transport) -> AIOKafkaConsumer:
        """R12: Faust passes 1,500 ms; the test broker holds every fetch for all of its
        wait, which is latency on every hop."""
        consumer = super()._create_worker_consumer(transport)
        consumer._fetch_max_wait_ms = getattr(
            transport.app, "fetch_max_wait_ms", self.fetch_max_wait_ms
        )
        return consumer

    async def _fetch_records(
        self,
        consumer: AIOKafkaConsumer,
        active_partitions: set[TP],
        timeout: float | None = None,
        max_records: int | None = None,
    ) -> Mapping[TP, list[ConsumerRecord[bytes, bytes]]]:
        """R15: up to ``FETCH_SHARE`` records of each partition that has records buffered,
        all in one fetch; ``max_records`` (Faust's ``broker_max_poll_records``) still
        bounds the whole.

        Faust asks aiokafka's fetcher once, for everything buffered (``max_records`` is
        None here; when set, the fetcher gives all of it to the first partition buffered,
        call after call, until that chunk is used up): a partition's chunk came to the
        drain loop whole, and was delivered before the next fetch brought the chunk of a
        partition whose response came a moment later. Asked a share at a time, each time
        of the partitions not served yet, the fetcher gives every partition with records
        buffered its share: the first ask waits as Faust's does (``timeout``), the others
        take only what is buffered. Runs within the fetch then alternate between the
        partitions (R8, ``RunScheduler``), and the rest of a chunk waits for the next
        fetch, beside whatever has come meanwhile."""
        fetch = super()._fetch_records
        if not active_partitions:  # a client's consumer (None), or nothing to fetch
            return await fetch(consumer, active_partitions, timeout, max_records)
        left = max_records
        taken: dict[TP, list[ConsumerRecord[bytes, bytes]]] = {}
        got = await fetch(consumer, active_partitions, timeout, _share(left))
        while got:
            taken.update(got)  # a partition is asked again only in the next fetch
            if left is not None:
                left -= sum(len(records) for records in got.values())
            rest = {tp for tp in active_partitions if tp not in taken}
            if not rest or left == 0:
                break
            got = await fetch(consumer, rest, 0, _share(left))
        return taken

    def seek(self, partition: TP, offset: int) -> None:
        """R11: seeks in the consumer thread, while the caller (the event loop) waits.

        Faust calls aiokafka's ``seek`` from the event loop's thread while the consumer
        thread may be reading its fetched records: the fetcher crashed, and a seek landing
        between a partition's read and the position moved past it would be overwritten,
        its re-read skipped. Queued to the thread's loop, the seek runs between two of its
        steps. The caller blocks rather than awaits, so the drain loop cannot read and
        deliver before the seek is done (awaiting it lost decisions in the crash test).
        The consumer thread never waits on the event loop synchronously, so this cannot
        deadlock; it waits for at most one step of that loop.
        """
        seek = self._ensure_consumer().seek
        loop = self.thread_loop
        if not loop.is_running() or _running_loop() is loop:
            seek(partition, offset)  # nothing runs concurrently with it
            return
        done: concurrent.futures.Future[None] = concurrent.futures.Future()

        def run() -> None:
            if done.set_running_or_notify_cancel():
                try:
                    seek(partition, offset)
                except BaseException as exc:  # the caller raises it
                    done.set_exception(exc)
                else:
                    done.set_result(None)

        loop.call_soon_threadsafe(run)
        try:
            done.result(timeout=self.seek_timeout_s)
        except concurrent.futures.TimeoutError:
            done.cancel()  # if it has not started, it never will
            raise


class Settlement:
    """R10's hand-over, one way: the consumer asks (``ask``) and waits; the party that
    acknowledges its events (``batches.Checkpoints``) watches for a request (``asked``),
    settles everything applied so far and answers it (``answer``).

    The consumer holds nothing of that party, which starts after it and may stop first:
    while no party answers (``answering`` is False) an ask returns at once, as nothing has
    been applied to settle. Requests are numbered, so an answer covers exactly the
    requests made before its settling began."""

    def __init__(self) -> None:
        self.answering = False  # ``begin`` to ``close``
        self._asked = 0  # requests made
        self._answered = 0  # requests covered by an answer
        self._changed = asyncio.Condition()

    def begin(self) -> None:
        """A party answers from now on (it must not await before it can)."""
        self.answering = True

    async def ask(self) -> None:
        if not self.answering:
            return
        async with self._changed:
            self._asked += 1
            request = self._asked
            self._changed.notify_all()
            await self._changed.wait_for(lambda: self._answered >= request or not self.answering)

    async def asked(self, timeout: float) -> int:
        """Waits up to ``timeout`` seconds for a request; the requests made so far, which
        settling from now on covers."""
        async with self._changed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._changed.wait_for(lambda: self._asked > self._answered), timeout
                )
            return self._asked

    async def answer(self, covered: int) -> None:
        async with self._changed:
            self._answered = max(self._answered, covered)
            self._changed.notify_all()

    async def close(self) -> None:
        """The party stops answering: whoever waits is released."""
        async with self._changed:
            self.answering = False
            self._changed.notify_all()


def _share(left: int | None) -> int:
    """R15: what one ask of the fetcher may take, with ``left`` of the fetch's bound (None:
    no bound)."""
    return FETCH_SHARE if left is None else min(FETCH_SHARE, left)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class Consumer(faust_aiokafka.Consumer):
    """Commits only runs of applied offsets that start at the committed offset, and
    delivers each agent source partition in order from where it was sought (R1-R15)."""

    #: Events the agent has marked applied and not yet acknowledged (R2).
    _applied: WeakSet[Message]
    #: A run's first record -> the rest of its run, for as long as that record lives (R8).
    _runs: WeakKeyDictionary[Message, list[Message]]
    #: The offset each agent source partition must deliver next (R1, R5).
    _next: dict[TP, int]
    #: Partitions sought back to this offset and not read from it since (R1, R4).
    _rereading: dict[TP, int]
    #: Rebalances and seeks to the committed offsets so far: a delivery that spans one
    #: moves nothing (R7).
    _seeks: int
    #: The generation whose streams recovery has resumed (R6).
    _resumed: int | None
    #: What the last seek to the committed offsets found, by partition (R5).
    _sought: Mapping[TP, int | None]
    #: Where R10 asks for every applied batch to be settled.
    settlement: Settlement
    #: Fetches the drain loop has begun, the one under way included (R13).
    _fetches: int
    #: Partitions -> the last fetch begun before they were last sought (R13).
    _read_again_during: dict[TP, int]
    #: Events of a log made again, under way when it was found: they count for nothing (R14).
    _stale: WeakSet[Message]
    #: Partitions reading a log made again -> where it ended when found (R14).
    _restarted_to: dict[TP, int]
    #: When the drain loop next looks for partitions expecting beyond their end (R14).
    _ends_due: float
    #: Partitions whose broker's log end contradicted their fetches -> since when (R14).
    _contradicted: dict[TP, float]

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self._applied = WeakSet()
        self._runs = WeakKeyDictionary()
        self._next = {}
        self._rereading = {}
        self._seeks = 0
        self._resumed = None
        self._sought = {}
        self.settlement = Settlement()
        self._fetches = 0
        self._read_again_during = {}
        self._stale = WeakSet()
        self._restarted_to = {}
        self._ends_due = 0.0
        self._contradicted = {}

    def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
        """R11, R12: the consumer thread of this module."""
        return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    # -- Delivery (R1, R4-R9) -----------------------------------------------------------

    async def _drain_messages(self, fetcher: ServiceT) -> None:
        """Faust's drain loop: an agent source record is taken under R1 (``_take``) into
        a run of its partition (R8); any other record is delivered as Faust does (R9).

        Each delivery is awaited rather than raced against the flow's suspension in two
        tasks, as Faust's ``wait_first`` does per message (a tenth of a busy worker's CPU):
        a rebalance's seek reads again whatever it interrupts (R5, R7); and the loop is
        given back between two runs (``runtime/slices.py``), as a delivery may give it back. A
        standby's records are gathered and applied, a lot at a time, before anything else
        is awaited (R13)."""
        ordered = self.app.topics.acks_enabled_for  # the agents' sources, not changelogs
        standbys = cast(TableManager, self.app.tables).recovery.standby_tps  # kept warm
        stopped: tuple[type[BaseException], ...] = (
            *self.consumer_stopped_errors,
            asyncio.CancelledError,
        )
        pause = Slices()
        try:
            while not (self.should_stop or fetcher.should_stop):
                sought: set[TP] = set()  # sought back: the rest of this fetch is stale (R1)
                run: list[Message] = []  # accepted, not yet delivered: nothing awaits (R8)
                standby: list[Message] = []  # a standby partition's, not yet applied (R13)
                refused: set[TP] = set()  # standby partitions refused in this fetch (R13)
                generation = self.app.consumer_generation_id
                self._fetches += 1  # before the fetch begins: a seek meanwhile makes it stale
                fetch = self._fetches
                async for tp, message in self.getmany(timeout=1.0):
                    if standby and (tp != standby[0].tp or len(standby) >= STANDBY_RECORDS):
                        await self._apply_standby(standby, generation, fetch, refused, standbys)
                        standby = []
                        await pause()
                    if run and (tp != run[0].tp or len(run) >= RUN_RECORDS):
                        await self._deliver(run)
                        run = []
                        await pause()  # making a whole fetch into messages holds the loop
                    if tp in standbys:
                        standby.append(message)
                    elif not ordered(message.topic):
                        await self._deliver_as_faust_does(tp, message)
                    elif await self._take(tp, message, run, sought):
                        run.append(message)
                if standby:
                    await self._apply_standby(standby, generation, fetch, refused, standbys)
                if run:
                    await self._deliver(run)
                await self._check_partition_ends()  # R14
                await asyncio.sleep(0)
        except stopped:
            if not self.app.should_stop:
                raise  # stopping the app stops the consumer under the loop: not an error

    async def _take(self, tp: TP, message: Message, run: list[Message], sought: set[TP]) -> bool:
        """Whether an agent source record is the next to deliver (R1), in one place.

        The record is the next if its offset is the one expected: the run's next, else the
        partition's (R5). A record that reveals a hole first has the run before it
        delivered (R8: no run spans a hole), then either ends a fresh read from the
        expected offset, the hole being absent offsets (R4), or has the partition sought
        back to that offset; then False, and ``sought`` names the partition.

        Worked example, the partition expecting 600 and nothing in the run:

        - 600 is taken; 601 then is too (the run expects 601); 598 is dropped (R1).
        - 700 is not: the partition is sought back to 600, and 701 in the same fetch is
          dropped as stale. If the read from 600 then starts at 603, offsets 600-602 do
          not exist: they are absent (R4) and 603 is taken.
        """
        if tp in sought or not (self.flow_active and self._recovered()):
            return False  # stale (R1); a rebalance or its recovery is under way (R6)
        offset = message.offset
        expected = run[-1].offset + 1 if run else self._expected(tp, offset)
        if offset == expected:
            return True
        if offset < expected:  # delivered already, since the last seek; unless the log
            if self._beyond_end(tp, expected) and await self._restart(tp, expected):
                sought.add(tp)  # ends below it: made again, and now read from its start (R14)
            return False
        if run:
            await self._deliver(run)
            run.clear()
            expected = self._expected(tp, offset)  # as that delivery left it (R7)
            if offset == expected:
                return True
        if self._rereading.pop(tp, None) == expected:
            self._mark_absent(tp, expected, offset)  # a fresh read from there (R4)
            return True
        self._rereading[tp] = expected
        with contextlib.suppress(IllegalStateError):  # no longer assigned: the rebalance
            await self.seek(tp, expected)  # under way seeks to the committed offset (R5)
        sought.add(tp)
        return False

    def _expected(self, tp: TP, offset: int) -> int:
        """R5: the partition's expectation; without one, its committed offset, else (the
        seek to the committed offsets failed) ``offset``, the offset at hand."""
        expected = self._next.get(tp)
        if expected is None:
            committed = self._committed_offset.get(tp)
            expected = self._next[tp] = offset if committed is None else committed
        return expected

    def _recovered(self) -> bool:
        """R6: whether recovery has resumed the streams of the current generation."""
        return self._resumed == self.app.consumer_generation_id

    async def _deliver(self, run: list[Message]) -> None:
        """R8: delivers a run of consecutive records of one partition as its first record
        (the agent takes the rest from ``delivered``): Faust's conductor, channel and stream
        then cost once per run, not once per record. R7: a delivery that a seek to the
        committed offsets overtook moves nothing."""
        first, last = run[0], run[-1]
        if len(run) > 1:
            self._runs[first] = run[1:]  # not the first itself: the entry would keep it alive
        seeks = self._seeks
        await self.callback(first)  # a wait in here ends with the rebalance too
        if seeks == self._seeks:  # else delivered to a stream that drops it
            self._read_offset[first.tp] = last.offset
            self._next[first.tp] = last.offset + 1
        if self._commit_every is not None and self._n_acked >= self._commit_every:
            self._n_acked = 0  # Faust's commit every n acknowledgements, kept
            await self.commit()

    async def _deliver_as_faust_does(self, tp: TP, message: Message) -> None:
        """R9: a record of another topic (an active partition's changelog, a reply) is
        delivered as Faust does; a standby's never comes here (R13)."""
        last = self._read_offset[tp]
        if last is None or message.offset >= last:
            await self.wait_first(self.callback(message), self.suspend_flow.wait())
            self._read_offset[tp] = message.offset

    async def _apply_standby(
        self,
        records: list[Message],
        generation: int,
        fetch: int,
        refused: set[TP],
        standbys: set[TP],
    ) -> None:
        """R13: a lot of a standby partition's records of fetch number ``fetch``, applied to
        its table at once, or none of them nor any later lot of the partition in the fetch
        (``refused``). A lot applied after refused ones, or from a fetch begun before the
        partition was sought back, would move the table's offset past records it never
        applied, which every later read would then skip as applied."""
        tp = records[0].tp
        if tp in refused:
            return
        recovery = cast(TableManager, self.app.tables).recovery
        live = (
            tp in standbys
            and generation == self.app.consumer_generation_id
            and self.flow_active
            and self._recovered()
        )
        if not live or fetch <= self._read_again_during.get(tp, 0):
            refused.add(tp)
            if live:  # recovery is done: no read again is to come, so this one
                seen = recovery.standby_offsets.get(tp)
                await self.read_again({tp: max(0, seen or 0)})
            return
        seen = recovery.standby_offsets.get(tp)
        fresh = records if seen is None else [r for r in records if r.offset > seen]
        if fresh:
            cast(KeyPartitionedTable, recovery.tp_to_table[tp]).apply_standby(fresh)
            recovery.standby_offsets[tp] = self._read_offset[tp] = fresh[-1].offset

    def delivered(self, message: Message) -> list[Message]:
        """R8: the records delivered as ``message``, itself and the rest of its run. Every
        agent on these topics must read its events so (one that reads ``event.value``
        sees only each run's first record)."""
        return [message, *self._runs.get(message, ())]

    def _mark_absent(self, tp: TP, start: int, end: int) -> None:
        """R4: offsets ``start`` up to, not including, ``end`` do not exist; they count as
        done for the commit (R3).

        This replaces Faust's ``_add_gap(tp, offset_from, offset_to)``, whose interval
        includes ``offset_to``, the fetched record that revealed the gap: it counts as done
        before it is applied, and a crash commits past it. Its only caller is Faust's drain
        loop, replaced here, so no override under its name is needed; ``pins.py`` checks
        that no other Faust code calls it.

        Examples, the committed offset 11: ``(11, 13)`` marks 11 and 12, not 13; ``(9, 13)``
        marks 11 and 12 too (the committed offset covers the rest); ``(11, 11)`` marks
        nothing. With nothing committed, ``(5, 7)`` marks 5 and 6.
        """
        committed = self._committed_offset[tp]
        start = start if committed is None else max(start, committed)
        if start < end:
            gaps = self._gap[tp]
            gaps.addi(start, end)
            gaps.merge_overlaps()

    # -- A log made again (R14) ---------------------------------------------------------

    def _beyond_end(self, tp: TP, expected: int) -> bool:
        """R14: whether the last fetch of ``tp`` answered a high watermark below
        ``expected``."""
        end = self._fetched_end(tp)
        return end is not None and end < expected

    def _fetched_end(self, tp: TP) -> int | None:
        """The high watermark the last fetch of ``tp`` answered; None before one did, or
        when ``tp`` is not assigned."""
        try:
            return self.highwater(tp)
        except (AssertionError, KeyError, IllegalStateError, ConsumerNotStarted):
            return None

    async def _check_partition_ends(self) -> None:
        """R14: at most every ``PARTITION_END_CHECK_S``, each agent source partition whose
        fetches answer a high watermark below its expectation. A broker may answer a fetch
        beyond the end with no records at all (tansu): no record would ever reveal it."""
        now = time.monotonic()
        if now < self._ends_due or not (self.flow_active and self._recovered()):
            return
        self._ends_due = now + PARTITION_END_CHECK_S
        ordered = self.app.topics.acks_enabled_for
        for tp, expected in list(self._next.items()):
            if ordered(tp.topic) and self._beyond_end(tp, expected):
                await self._restart(tp, expected)
            else:
                self._contradicted.pop(tp, None)  # the high watermark caught up

    async def _restart(self, tp: TP, expected: int) -> bool:
        """R14: if the broker's log of ``tp`` ends below ``expected``, the partition is read
        again from the start of its log; whether it was.

        Nothing is decided while the broker does not answer (the topic gone again), nor
        once a rebalance or a seek has set the expectation anew meanwhile."""
        seeks = self._seeks
        try:
            end = (await self.highwaters(tp)).get(tp)
            start = (await self.earliest_offsets(tp)).get(tp)
        except KafkaError:
            return False  # asked again at the next check
        if end is None or start is None or seeks != self._seeks or self._next.get(tp) != expected:
            return False
        if end >= expected:  # the fetch's high watermark lagged, or the broker contradicts it
            await self._contradicted_since(tp, expected, end)
            return False
        self._contradicted.pop(tp, None)
        end = max(end, self._fetched_end(tp) or 0)  # tansu's ListOffsets answers short
        await self.maybe_wait_for_commit_to_finish()  # it records the old offset when done
        if seeks != self._seeks or self._next.get(tp) != expected:
            return False
        for message in list(self._unacked_messages):  # delivered from the old log
            if message.tp == tp:
                self._stale.add(message)
        for first, rest in list(self._runs.items()):
            if first.tp == tp:
                self._stale.add(first)
                self._stale.update(rest)
        self._acked[tp].clear()
        self._acked_index[tp].clear()
        self._gap[tp].clear()
        self._committed_offset[tp] = start
        self._next[tp] = start
        self._rereading.pop(tp, None)
        if end > start:
            self._restarted_to[tp] = end
        with contextlib.suppress(IllegalStateError):  # no longer assigned: the rebalance
            await self.seek(tp, start)  # under way seeks to the committed offset (R5)
        logs.event(
            "partition_restarted",
            logging.WARNING,
            topic=tp.topic,
            partition=tp.partition,
            position=expected,
            log_start=start,
            log_end=end,
        )
        metrics.PARTITIONS_RESTARTED.labels(topic=tp.topic).inc()
        return True

    async def _contradicted_since(self, tp: TP, expected: int, end: int) -> None:
        """R14: fetches answer a high watermark below ``expected``, the broker a log end at
        or above it. For a moment that is a new leader catching up; for longer, nothing
        tells whether records were passed over, and the worker stops."""
        since = self._contradicted.setdefault(tp, time.monotonic())
        if time.monotonic() - since >= PARTITION_END_PATIENCE_S:
            await self.app.crash(
                PartitionEndUnknown(
                    f"{tp.topic}:{tp.partition}: for {PARTITION_END_PATIENCE_S:.0f} s its "
                    f"fetches have answered a high watermark below offset {expected}, where "
                    f"this worker reads it, while the broker says its log ends at {end}: "
                    "whether the topic was made again (its records then to be read from its "
                    "start) cannot be told. Check the topic and the brokers; the worker reads "
                    "on from its last commit when started again."
                )
            )

    def rereading(self) -> int:
        """R14: how many partitions are reading a log made again up to where it ended when
        found (for ``/metrics``)."""
        assigned = self.assignment()
        for tp, end in list(self._restarted_to.items()):
            if tp not in assigned or self._next.get(tp, end) >= end:
                del self._restarted_to[tp]
        return len(self._restarted_to)

    # -- Expectations and recovery (R5, R6) ---------------------------------------------

    def streams_resumed(self, generation: int) -> None:
        """R6: recovery has resumed the streams of ``generation`` (and emptied their
        queues): from here a delivered record stays delivered."""
        self._resumed = generation

    async def read_again(self, offsets: Mapping[TP, int]) -> None:
        """R6: seeks each partition to its offset; one no longer assigned is left alone.
        R13: a standby's fetch begun before the seek is not applied."""
        for tp, offset in offsets.items():
            with contextlib.suppress(IllegalStateError):  # moved on: a rebalance
                await self.seek(tp, offset)
            self._read_again_during[tp] = self._fetches

    async def read_again_from_expected(self) -> None:
        """R6: before the streams resume, each agent source partition is read again from
        its expected offset. What was read while recovery ran was held back, and a
        partition with nothing newer to fetch would never come back to it (a restarted
        worker left a partition's backlog unprocessed so)."""
        ordered = self.app.topics.acks_enabled_for
        await self.read_again({tp: o for tp, o in self._next.items() if ordered(tp.topic)})

    def stop_flow(self) -> None:
        """R5: a rebalance begins, and each partition expects its last known committed
        offset again.

        What this generation delivered past it may have been dropped by the stream (its
        generation past) and must be delivered again, not taken for read; the new
        assignment reads from the committed offset, at or after this one (a later offset
        is sought back to it: records read twice, none skipped), until the seek after
        recovery sets the expectations anew."""
        super().stop_flow()
        self._expect_committed()

    def _expect_committed(self) -> None:
        """R5, R7: every partition expects its last known committed offset (none known:
        none, and ``_expected`` decides at its first record)."""
        self._seeks += 1
        self._next = {tp: c for tp, c in self._committed_offset.items() if c is not None}
        self._rereading.clear()

    async def seek_to_committed(self) -> Mapping[TP, int]:
        """R5: remembers which partitions this seek asked about, and what it found."""
        self._sought = sought = await super().seek_to_committed()
        return sought

    async def perform_seek(self) -> None:
        """R5: seeks to the committed offsets, and expects them; a partition with none is
        expected from the start of its log, where the consumer reads it from.

        Without an expectation a partition took any offset first, and a record read but
        not delivered while recovery ran was passed over for good (the scale test)."""
        self._expect_committed()  # first: if the seek fails, a read from further on is
        self._sought = {}  # sought back when its first message comes
        await super().perform_seek()
        # Only the partitions this seek asked about: one assigned while it ran (it spans a
        # request per partition) has a commit this seek never saw, not "none".
        assigned = self.assignment()
        unknown = [
            tp for tp in self._sought if tp in assigned and self._committed_offset.get(tp) is None
        ]
        if unknown:
            starts = await self.earliest_offsets(*unknown)
            for tp, start in starts.items():
                if self._committed_offset.get(tp) is None:  # and no commit came meanwhile
                    self._committed_offset[tp] = max(0, start or 0)
        self._expect_committed()

    # -- Acknowledgement and commit (R2, R3, R10) ---------------------------------------

    def applied(self, message: Message) -> None:
        """R2: marks an event whose effects are all written: its acknowledgement counts."""
        self._applied.add(message)

    def ack_applied(self, message: Message) -> bool:
        """R2: ``applied`` and ``ack`` in one step, for the agent's own acknowledgement of an
        event it has applied (its checkpoints' step 4b): no mark is kept in between."""
        if message.generation_id != self.app.consumer_generation_id or (
            self._stale and message in self._stale  # of a log made again (R14)
        ):
            self._unacked_messages.discard(message)
            return False
        return bool(super().ack(message))

    def ack(self, message: Message) -> bool:
        """R2: only an applied event of the current generation is acknowledged to Faust."""
        if (
            message not in self._applied
            or message.generation_id != self.app.consumer_generation_id
            or (self._stale and message in self._stale)  # of a log made again (R14)
        ):
            # Skipped, or fetched before the latest rebalance: its partition is sought back
            # to the committed offset, so the event comes again and is applied then.
            self._unacked_messages.discard(message)
            return False
        self._applied.discard(message)
        return bool(super().ack(message))

    async def wait_empty(self) -> None:
        """R10: before a rebalance or a stop, every applied event is settled, then Faust
        waits for the acknowledgements (the agent acknowledges only at a checkpoint)."""
        await self.settlement.ask()
        await super().wait_empty()

    def _new_offset(self, tp: TP) -> int | None:
        """R3: the offset to commit, walked from the committed one over acknowledged (R2)
        and absent (R4) offsets; None: nothing new to commit.

        Worked examples, the committed offset 10:

        - acknowledged 10, 11, 12: 13.
        - acknowledged 11, 12: None, 10 is missing (Faust committed 13 here, #312).
        - acknowledged 10, absent 11-12 (R4), acknowledged 13: 14. Without 13 acknowledged:
          13, so a crash reads 13 again (Faust's gap took 13 in, and committed 14).
        - acknowledged 3 and 10 (3 left from before a rebalance): 11, and 3 is dropped;
          10 stays until a commit covers it, so if the commit of 11 fails and the
          committed offset later proves to be 8 (learnt late), 8 and 9 hold the commit and
          10 is still there when they come.
        - nothing committed (None), acknowledged 0, 1: None, whatever the run, until the
          committed offset is known.
        """
        committed = self._committed_offset[tp]
        acked = self._acked[tp]
        gaps = self._gap[tp]
        if committed is None or not (acked or gaps):
            return None  # never guess where a partition's processing started
        acked.sort()
        done = self._acked_index[tp]
        cut = bisect.bisect_left(acked, committed)  # what the committed offset covers
        if cut:
            done.difference_update(acked[:cut])
            del acked[:cut]
        if gaps:
            gaps.chop(0, committed)
        position = committed
        while True:
            if position in done:
                position += 1
            elif gaps and (spans := gaps.at(position)):
                position = max(span.end for span in spans)
            else:
                break
        # Nothing at or above the committed offset is dropped before its commit is.
        return None if position == committed else position


class Transport(faust_aiokafka.Transport):
    """Faust's aiokafka transport with the consumer of this module."""

    Consumer = Consumer

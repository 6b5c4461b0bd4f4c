"""Faust's Kafka consumer with its at-least-once holes closed (SPEC §5).

Faust commits, for each partition, the offset after the longest run of acknowledged events.
Three of its ways of counting that run could commit past an event no agent had applied,
and a worker killed after such a commit loses the event for good:

- a stream acknowledges the events it skips, among them those it takes while a rebalance
  has suspended the flow and those fetched before the rebalance (faust-streaming #216,
  #221), although no agent applied them: here an acknowledgement counts only for an event
  the agent has marked ``applied``, in the consumer generation it was fetched in;
- the run is taken from the first acknowledged offset even when it does not start at the
  committed one: with nothing committed yet any run counted, and an offset missing right
  after the committed one was not seen as a gap (#312): here a run must start at the
  committed offset (or at the start of the log), and only acknowledged offsets extend it;
- a jump in fetched offsets marks the fetched event itself as a gap, i.e. as done before
  it is processed: here a gap ends before the event that revealed it.

And Faust's drain loop (``Consumer._drain_messages``) could hand the agent a partition's
records out of order or with holes: a fetch in flight while Faust seeks back to the committed
offsets (after recovery) delivered records from the old position first and then dropped the
re-read ones as read before; a fetch dropped while the flow was stopped was never read again
when that seek failed ("exception performing seek when flow not active"). The core applies a
source record once, by offset, so a record that came after a later one was taken for a
duplicate: a session lost it. Here each partition of an agent's source is delivered from the
offset it was sought to, one offset after the other; any other offset makes the partition be
sought back, and offsets missing from that fresh read do not exist and are a gap. A
rebalance, and a seek to the committed offsets, first make every partition expect its last
known committed offset again: what an earlier generation delivered (and the stream dropped,
its generation past) is read again and delivered, never taken for read. The loop
also awaits each such delivery instead of racing it against the flow's suspension in two
tasks per message (Faust's ``wait_first``, a tenth of a busy worker's CPU), and delivers
consecutive records of one partition (up to ``RUN_RECORDS``, taken from a fetch a run at a
time by ``RunScheduler``) as one event, the run's first record, whose stream hands the agent
the run (``delivered``): a run is accepted, offset by offset, exactly as single records were,
and delivered before anything else is awaited, so it is delivered, dropped with a
generation, or read again whole. Faust's per-event path then costs once per run. Changelog
records (a standby's) keep Faust's delivery exactly: a standby that skipped one and applied
the next would persist an offset past it, and a worker taking the partition over would
never read it (turn bodies went missing so when the streams' flow was paused).

Nothing is delivered to an agent in a generation until its recovery has resumed the streams:
Faust resumes the consumer's flow while recovery reads the changelogs and only then seeks the
stream partitions and resumes the app's flow control, which empties every agent's queue
(faust-streaming #596). What a partition delivered in between was dropped with the queue
while its offsets counted as delivered: a worker that took partitions over with a backlog
lost the rest of it (the scale test's missing turns). Every such partition has an
expectation before its first delivery: with no committed offset it is the start of its log,
so a record read and not delivered is always read again. And the commit only walks the
acknowledged offsets from the committed one, dropping those below it, so a commit that does
not go through (or a committed offset learnt late) never strands a run it has to start from.

The agent acknowledges an event only once its turns, dead letters and state are written, and
Faust flushes the producer before every commit, so a committed offset is one whose effects
are on the broker. The consumer's fetch wait, hard-coded by Faust, is a setting here.
"""

from __future__ import annotations

import asyncio
import bisect
import concurrent.futures
import contextlib
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, ClassVar, cast
from weakref import WeakKeyDictionary, WeakSet

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import IllegalStateError
from faust.tables.manager import TableManager
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.transport.utils import DefaultSchedulingStrategy
from faust.types import TP, Message
from mode import ServiceT

RUN_RECORDS = 100  # at most this many records of a partition delivered as one


class RunScheduler(DefaultSchedulingStrategy):
    """Faust's round robin between partitions, a run of records of one at a time.

    Faust's own takes one record of each partition in turn, which leaves no run to deliver.
    """

    def iterate(self, records: Mapping[TP, list[Any]]) -> Iterator[tuple[TP, Any]]:
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
    """Faust's consumer thread, with the fetch wait of the app's settings and its seeks
    made in the thread that owns the aiokafka consumer."""

    fetch_max_wait_ms: ClassVar[int] = 500
    seek_timeout_s: ClassVar[float] = 30.0

    def _create_worker_consumer(self, transport: Any) -> AIOKafkaConsumer:
        consumer = super()._create_worker_consumer(transport)
        # Faust passes 1,500 ms. A broker holds a fetch up to this long when it has nothing
        # new; the test broker holds every fetch for all of it, which is latency per hop.
        consumer._fetch_max_wait_ms = self.fetch_max_wait_ms
        return consumer

    def seek(self, partition: TP, offset: int) -> None:
        """Seeks in the consumer thread, while the caller (the event loop) waits.

        Faust calls aiokafka's ``seek`` from the event loop's thread while the consumer
        thread may be in the middle of reading its fetched records: the fetcher crashed
        (``KeyError`` in ``fetched_records``), and a seek landing between the read of a
        partition's records and the position moved past them would be overwritten, its
        re-read skipped. Queued to the thread's loop, the seek runs between two of its steps.

        The caller blocks, it does not await: nothing else runs on the event loop before the
        seek is done, exactly as with Faust's direct call. Awaiting it (Faust's
        ``call_thread``) let a drain loop read and deliver meanwhile, and the crash test lost
        decisions (reverted in d90ac64). The consumer thread never waits on the event loop
        synchronously, so this cannot deadlock; it waits for at most one step of that loop.
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


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class Consumer(faust_aiokafka.Consumer):
    """Commits only runs of processed offsets that start at the committed offset."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._applied: WeakSet[Message] = WeakSet()
        # A run's first record -> the rest of the run, for as long as that record lives.
        self._runs: WeakKeyDictionary[Message, list[Message]] = WeakKeyDictionary()
        self._next: dict[TP, int] = {}  # the offset each partition must deliver next
        self._rereading: dict[TP, int] = {}  # sought back to this offset, not yet read
        self._seeks = 0  # seeks to the committed offsets so far
        self._resumed: int | None = None  # the generation whose streams recovery resumed
        self._sought: Mapping[TP, int | None] = {}  # the last seek to the committed offsets
        # Set by the app: settles every batch applied so far (``checkpointing/batches.py``).
        self.settle: Callable[[], Awaitable[None]] | None = None

    def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
        return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    def streams_resumed(self, generation: int) -> None:
        """Recovery has resumed the streams of ``generation`` (and emptied their queues)."""
        self._resumed = generation

    async def read_again(self, offsets: Mapping[TP, int]) -> None:
        """Seeks each partition to its offset; one no longer assigned is left alone."""
        for tp, offset in offsets.items():
            with contextlib.suppress(IllegalStateError):  # moved on: a rebalance
                await self.seek(tp, offset)

    async def read_again_from_expected(self) -> None:
        """Before the streams resume: each agent source partition is read again from its
        expected offset. What was read while recovery ran was held back, and a partition
        with nothing newer to fetch would never have come back to it (a restarted worker
        left a partition's backlog unprocessed so)."""
        ordered = self.app.topics.acks_enabled_for
        await self.read_again({tp: o for tp, o in self._next.items() if ordered(tp.topic)})

    def applied(self, message: Message) -> None:
        """Marks an event whose effects are all written: its acknowledgement then counts."""
        self._applied.add(message)

    def ack(self, message: Message) -> bool:
        if message not in self._applied or (
            message.generation_id != self.app.consumer_generation_id
        ):
            # Skipped, or fetched before the latest rebalance: its partition is sought back
            # to the committed offset, so the event comes again and is applied then.
            self._unacked_messages.discard(message)
            return False
        self._applied.discard(message)
        return bool(super().ack(message))

    def delivered(self, message: Message) -> list[Message]:
        """The records delivered as ``message``: itself and the rest of its run. Every agent
        on these topics must read its events so (one that reads ``event.value`` sees only
        each run's first record)."""
        return [message, *self._runs.get(message, ())]

    async def _drain_messages(self, fetcher: ServiceT) -> None:
        """Faust's drain loop, delivering each partition in order from where it was sought,
        a run of consecutive records of one partition at a time."""
        ordered = self.app.topics.acks_enabled_for  # the agents' sources, not changelogs
        standbys = cast(TableManager, self.app.tables).recovery.standby_tps  # kept warm
        stopped: tuple[type[BaseException], ...] = (
            *self.consumer_stopped_errors,
            asyncio.CancelledError,
        )
        try:
            while not (self.should_stop or fetcher.should_stop):
                sought: set[TP] = set()  # read again: the rest of this fetch is stale
                run: list[Message] = []  # accepted, not yet delivered: nothing awaits meanwhile
                async for tp, message in self.getmany(timeout=1.0):
                    if run and (tp != run[0].tp or len(run) >= RUN_RECORDS):
                        await self._deliver(run)
                        run = []
                    if tp in sought:
                        continue
                    offset = message.offset
                    if not ordered(message.topic):
                        if tp in standbys and self._resumed != self.app.consumer_generation_id:
                            continue  # read again once the streams are resumed (recovery)
                        await self._deliver_as_faust_does(tp, message)
                        continue
                    if not self.flow_active or self._resumed != self.app.consumer_generation_id:
                        continue  # a rebalance or its recovery is under way: read it again
                    expected = run[-1].offset + 1 if run else self._next.get(tp)
                    if expected is None:
                        expected = self._next[tp] = self._start_of(tp, offset)
                    if offset < expected:
                        continue  # delivered already, since the last seek
                    if offset > expected:
                        if run:
                            await self._deliver(run)
                            run = []
                        if not await self._in_order(tp, offset):
                            sought.add(tp)
                            continue
                    run.append(message)
                if run:
                    await self._deliver(run)
                await asyncio.sleep(0)
        except stopped:
            if not self.app.should_stop:
                raise  # stopping the app stops the consumer under the loop: not an error

    async def _deliver(self, run: list[Message]) -> None:
        """Delivers a run of consecutive records of one partition as its first record (the
        agent takes the rest from ``delivered``): Faust's conductor, channel and stream
        then cost once per run, not once per record."""
        first, last = run[0], run[-1]
        if len(run) > 1:
            self._runs[first] = run[1:]  # not the first itself: the entry would keep it alive
        seeks = self._seeks
        await self.callback(first)  # a wait in here ends with the rebalance too
        if seeks == self._seeks:  # else delivered to a stream that drops it
            self._read_offset[first.tp] = last.offset
            self._next[first.tp] = last.offset + 1
        if self._commit_every is not None and self._n_acked >= self._commit_every:
            self._n_acked = 0
            await self.commit()

    async def _deliver_as_faust_does(self, tp: TP, message: Message) -> None:
        """A changelog record (a standby's, or a reply): Faust's own delivery, unchanged."""
        last = self._read_offset[tp]
        if last is None or message.offset >= last:
            await self.wait_first(self.callback(message), self.suspend_flow.wait())
            self._read_offset[tp] = message.offset

    async def _in_order(self, tp: TP, offset: int) -> bool:
        """Whether ``offset`` (not below the expected one) may be delivered; if not, the
        partition is read again from the expected offset.

        Offsets missing in a fresh read from the expected one do not exist (transaction
        markers, compaction): that gap is done. Anything else missing was fetched and lost
        between Faust's layers, and the partition is sought back to it.
        """
        expected = self._next[tp]
        if offset == expected:
            return True
        if self._rereading.get(tp) == expected:
            del self._rereading[tp]
            await self._add_gap(tp, expected, offset)
            return True
        self._rereading[tp] = expected
        with contextlib.suppress(IllegalStateError):  # no longer assigned: the rebalance
            await self.seek(tp, expected)  # under way seeks to the committed offset
        return False

    def stop_flow(self) -> None:
        """A rebalance begins: each partition expects its last known committed offset again.

        What this generation delivered past it may have been dropped by the stream (its
        generation past) and must be delivered again, not taken for read; the new
        assignment reads from the committed offset, at or after this one (a later offset
        is sought back to it: records read twice, none skipped), until the seek after
        recovery sets the expectations anew."""
        super().stop_flow()
        self._expect_committed()

    def _expect_committed(self) -> None:
        """Every partition expects its last known committed offset (none known: any)."""
        self._seeks += 1
        self._next = {tp: c for tp, c in self._committed_offset.items() if c is not None}
        self._rereading.clear()

    async def wait_empty(self) -> None:
        """Before a rebalance or a stop: every applied event settled, then Faust's wait."""
        if self.settle is not None:
            await self.settle()
        await super().wait_empty()

    async def seek_to_committed(self) -> Mapping[TP, int]:
        self._sought = sought = await super().seek_to_committed()
        return sought

    async def perform_seek(self) -> None:
        """Seeks to the committed offsets, and expects them; a partition with none is
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

    def _start_of(self, tp: TP, offset: int) -> int:
        """The expectation of a partition no seek has set one for: its committed offset,
        else (the seek failed) the offset at hand."""
        committed = self._committed_offset.get(tp)
        return offset if committed is None else committed

    async def _add_gap(self, tp: TP, offset_from: int, offset_to: int) -> None:
        """Offsets ``offset_from`` up to, not including, ``offset_to`` (the fetched event)."""
        committed = self._committed_offset[tp]
        start = offset_from if committed is None else max(offset_from, committed)
        if start < offset_to:
            gaps = self._gap[tp]
            gaps.addi(start, offset_to)
            gaps.merge_overlaps()

    def _new_offset(self, tp: TP) -> int | None:
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
    Consumer = Consumer

"""Batches of applied records on their way to being committable.

A batch goes through four steps, its ``status`` naming the last one it completed; a step
begins only from the status before it, and anything else raises (``BatchStateError``):

1. OPEN: the agent applies records one at a time into the open batch (``add``).
2. SEALED: the open batch is sealed when it is full, or as soon as no earlier batch is
   still being sent (``added``, ``seal_now``), and a new one opens.
3. SENT: in the background, while the agent applies the next records, the sealed batch's
   turn revisions, dead letters and re-keyed records are handed to the producer (after the
   previous batch's, so a turn's revisions stay in order) and acknowledged by the broker;
   a batch is SENT only once every batch before it is (``_send``).
4. CHECKPOINTED: at a checkpoint (an ``interval`` after the last one began, and before a
   rebalance or a stop), (4a) every session changed since the last checkpoint is
   serialized as it was when the checkpoint began, a slice at a time while the agent goes
   on (``TableSessions.begin_seal``), and, once the batches sealed so far are SENT, written
   to the tables (each session once) and its changelog records acknowledged, and the final
   records of the turns it closed are written (``worker/final_records.py``); (4b) then
   those batches' events are marked applied and acknowledged to Faust, batch after batch
   in the order they were sealed, the snapshot is let go a slice at a time
   (``TableSessions.release``), and the events are committed (``checkpoint``,
   ``_every_interval``).

So a state on the changelog never names a record whose emissions are not on the broker, and
an offset is never committed before its record's state is on the changelog. Writing a
session once per checkpoint rather than once per batch keeps the changelog from outgrowing
the input.

FAILED: an exception in any step, or the agent failing (``fail``), marks the open batch and
every batch not yet CHECKPOINTED as FAILED, and stops the worker. A batch that failed
before step 4 is never acknowledged, nor is any batch after it (one that fails during 4b
may be in part: all of it is on the changelog by then): the sessions are written as one
snapshot of everything applied since the last checkpoint, the failing record's partial
changes included, so no later checkpoint could write a state without them. Everything
after the last checkpoint is read again by the worker that takes the partitions over.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from faust.types import Message

from stream_app.checkpointing.consumer import Consumer
from stream_app.core.records import Outputs
from stream_app.observability import logs
from stream_app.runtime.slices import Slices, let_go
from stream_app.state.sessions import Snapshot, TableSessions
from stream_app.state.tables import KeyPartitionedTable

IN_FLIGHT = 4  # sealed batches being sent at once before the agent waits for the oldest


class BatchStatus(enum.Enum):
    """The last step a batch has completed (the module's docstring numbers them)."""

    OPEN = "open"  # 1
    SEALED = "sealed"  # 2
    SENT = "sent"  # 3
    CHECKPOINTED = "checkpointed"  # 4
    FAILED = "failed"


#: The statuses each status may move to: one step forward, or FAILED before the last.
TRANSITIONS: dict[BatchStatus, frozenset[BatchStatus]] = {
    BatchStatus.OPEN: frozenset({BatchStatus.SEALED, BatchStatus.FAILED}),
    BatchStatus.SEALED: frozenset({BatchStatus.SENT, BatchStatus.FAILED}),
    BatchStatus.SENT: frozenset({BatchStatus.CHECKPOINTED, BatchStatus.FAILED}),
    BatchStatus.CHECKPOINTED: frozenset(),
    BatchStatus.FAILED: frozenset(),
}


class BatchStateError(RuntimeError):
    """A batch was asked to take a step its status does not allow: a bug, never retried."""


class Forward(NamedTuple):
    """A decoded input on its way to its session's partition of ``<id>-sessions`` (or, with
    ``topic``, a record on its way to that topic: a decision translated from the agents'
    telemetry, to the decisions topic)."""

    key: bytes
    value: bytes
    partition: int
    timestamp: float  # the input record's, for the turn latency histogram
    topic: str | None = None  # None: <id>-sessions


class Emitted(NamedTuple):
    """What applying one record emitted, and when its input was produced (None: a sweep
    or a dead letter, which no latency measures)."""

    outputs: Outputs
    started: float | None


@dataclass
class Batch:
    """Records applied together, sent together and acknowledged together: their events
    (``messages``) are kept until step 4, what they emit and forward only until step 3."""

    messages: list[Message] = field(default_factory=list)
    emitted: list[Emitted] = field(default_factory=list)
    forward: list[Forward] = field(default_factory=list)
    #: The last step this batch has completed.
    status: BatchStatus = BatchStatus.OPEN

    def advance(self, to: BatchStatus) -> None:
        """Moves to ``to``; raises if that is not the next step (or FAILED).

        The guard makes the lifecycle checkable where it matters: a batch whose send failed
        is FAILED, and its events can then never reach step 4b."""
        if to not in TRANSITIONS[self.status]:
            raise BatchStateError(f"a {self.status.value} batch cannot become {to.value}")
        self.status = to


def until_due(began: float, now: float, interval: float) -> float:
    """Seconds until the checkpoint after one that began at ``began`` is due."""
    return max(0.0, began + interval - now)


Send = Callable[[Batch], Awaitable[Sequence[Awaitable[object]]]]  # hands a batch to the producer


class Checkpoints:
    def __init__(
        self,
        store: TableSessions,
        tables: list[KeyPartitionedTable],
        consumer: Consumer,
        send: Send,
        observe: Callable[[Batch], None],
        crash: Callable[[BaseException], Awaitable[None]],
        interval: float,
        after_write: Callable[[Snapshot], Awaitable[None]] | None = None,
    ) -> None:
        self.store = store
        self.tables = tables
        self.consumer = consumer
        self.send = send
        self.observe = observe
        self.crash = crash
        self.interval = interval
        #: Called once a checkpoint's snapshot is on the changelogs, before its events are
        #: acknowledged: the final records of the turns it closed (``worker/final_records.py``).
        self.after_write = after_write
        self.open = Batch()
        #: The first failure (``fail``, or an exception in a step): from then on nothing
        #: is acknowledged.
        self.failure: BaseException | None = None
        self._handed: asyncio.Future[None] | None = None  # the last batch's sends enqueued
        self._sending: list[asyncio.Task[None]] = []  # step 3, oldest first
        self._sealed: list[Batch] = []  # sealed, not yet checkpointed, in order
        self._writing = asyncio.Lock()
        self._timer: asyncio.Task[None] | None = None

    def add(self, message: Message) -> Batch:
        """Step 1: ``message`` is being applied into the open batch, which is returned."""
        if self.open.status is not BatchStatus.OPEN:
            raise BatchStateError(f"a record added after the batches {self.open.status.value}")
        self.open.messages.append(message)
        return self.open

    async def added(self, full: int) -> None:
        """After a run of records is applied: seals the open batch when it is full, or at once
        when no batch is being sent (a record waits for no other); otherwise the batch grows
        until the one being sent is acknowledged, which seals it."""
        if self._timer is None:
            self.consumer.settlement.begin()  # before any await: a rebalance may come next
            self._timer = asyncio.create_task(self._every_interval())
        if len(self.open.messages) >= full:
            self.seal_now()
            while len(self._in_flight()) > IN_FLIGHT:
                await asyncio.wait([self._sending[0]])
        elif not self._in_flight():
            self.seal_now()

    def seal_now(self) -> None:
        """Step 2: seals the open batch, unless it is empty, and starts its step 3."""
        if self.failure is not None:
            return  # the open batch has failed with the rest: nothing more is sent
        batch, self.open = self.open, Batch()
        if not batch.messages and not batch.emitted:
            return
        batch.advance(BatchStatus.SEALED)
        handed = asyncio.get_running_loop().create_future()
        previous, self._handed = self._handed, handed
        before = self._sending[-1] if self._sending else None
        task = asyncio.create_task(self._send(batch, previous, handed, before))
        self._in_flight().append(task)
        self._sealed.append(batch)

    def fail(self, exc: BaseException) -> None:
        """The agent failed while applying records (``exc``): the open batch and every batch
        not yet checkpointed are FAILED, and no checkpoint acknowledges them or anything
        after them (``checkpoint`` does nothing from now on).

        Without it, the stop after the failure settled the open batch like any other, and
        the committed offset passed the failing record and the records fetched after it:
        lost, with no dead letter and no count. The worker must stop after this (the
        agent's failure stops it); ``crash`` is not called here, as the agent's own failure
        already does that."""
        self._fail(exc)

    def _fail(self, exc: BaseException) -> bool:
        """Marks the open batch and every batch not yet checkpointed FAILED; whether this
        is the first failure (the one to crash the worker with)."""
        first = self.failure is None
        if first:
            self.failure = exc
        for batch in [*self._sealed, self.open]:
            if TRANSITIONS[batch.status]:  # not CHECKPOINTED, not FAILED already
                batch.advance(BatchStatus.FAILED)
        return first

    async def _failed(self, exc: BaseException) -> None:
        """A step raised ``exc`` (a cancellation too: a checkpoint cut short has sealed a
        snapshot no later one repeats): every batch not yet checkpointed fails, and the
        worker stops, once, whichever step raised first. A FAILED batch always stops the
        worker: checkpoints do nothing after it, and a worker left running would commit
        nothing again."""
        if self._fail(exc):
            await self.crash(exc)

    async def checkpoint(self) -> int:
        """Step 4 for every batch sealed before it begins; nothing after a failure. The
        events acknowledged."""
        acknowledged = 0
        async with self._writing:
            if self.failure is not None:
                return 0
            try:
                self.seal_now()
                batches = list(self._sealed)
                # 4a: the sessions as they are now, serialized a slice at a time (the agent
                # goes on applying meanwhile); written once these batches are SENT.
                snapshot = self.store.begin_seal()
                await self.store.finish_seal(snapshot)
                last = self._sending[-1] if self._sending else None
                if last is not None:  # step 3 of these batches (each waits for the one before)
                    await asyncio.wait([last])
                    last.result()
                if self.failure is not None:
                    return 0  # failed meanwhile (``fail``): nothing is written
                await self.store.write(snapshot)
                for table in self.tables:
                    await table.written()
                if self.failure is not None:
                    return 0  # nor acknowledged
                self.store.settled(snapshot)
                if self.after_write is not None:
                    await self.after_write(snapshot)
                    if self.failure is not None:
                        return 0
                # 4b: the events, acknowledged in the order sealed, giving the loop back
                # between two, as a batch holds thousands (a commit meanwhile takes what is
                # acknowledged so far, R3, all of it on the changelog now);
                # a failure meanwhile stops the acknowledgements: the batches left are
                # FAILED, the one under way too, whatever of it was acknowledged.
                pause = Slices()
                for batch in batches:
                    for message in batch.messages:
                        if self.failure is not None:
                            break
                        self.consumer.ack_applied(message)
                        acknowledged += 1
                        await pause()
                    if self.failure is not None:
                        break  # FAILED with the rest, however far it got
                    batch.advance(BatchStatus.CHECKPOINTED)
                    del self._sealed[0]  # ``batch``: only seal_now appends, meanwhile
                    # Its events go now, not with every batch of the checkpoint when this
                    # returns: a checkpoint's tens of thousands of events, their runs and the
                    # consumer's weak references to them, freed in one step, hold the loop.
                    batch.messages.clear()
                    await pause()
                await self.store.release(snapshot)  # its records, a slice at a time
                await self.store.evict()  # what is written need not stay decoded
            except BaseException as exc:
                await self._failed(exc)
                raise
        return acknowledged

    def _in_flight(self) -> list[asyncio.Task[None]]:
        """The batches still in step 3, oldest first; a failed one raises here."""
        while self._sending and self._sending[0].done():
            self._sending.pop(0).result()
        return self._sending

    async def _send(
        self,
        batch: Batch,
        previous: asyncio.Future[None] | None,
        handed: asyncio.Future[None],
        before: asyncio.Task[None] | None,
    ) -> None:
        """Step 3 of one batch."""
        try:
            if previous is not None:
                await previous
            try:
                acks = await self.send(batch)
            finally:
                handed.set_result(None)
            await asyncio.gather(*acks)
            if before is not None:
                await before  # batches reach SENT in order
            if batch.status is BatchStatus.FAILED:
                return  # failed meanwhile (``fail``): sent again after the restart
            batch.advance(BatchStatus.SENT)
            self.observe(batch)
            if self.open.messages or self.open.emitted:
                self.seal_now()  # what arrived while this batch was being sent
            # What the batch sent is on the broker: until its checkpoint only its events are
            # needed, not a second of turns and re-keyed records held in memory; let go a
            # slice at a time, as freeing a thousand records' outputs at once holds the loop.
            await let_go(batch.emitted, batch.forward)
        except BaseException as exc:
            await self._failed(exc)
            raise

    async def _every_interval(self) -> None:
        """Step 4 every ``interval`` seconds from the start of the one before (at once if
        that one took longer), and at once when the consumer asks (its R10, before a
        rebalance or a stop); a request is answered by the checkpoint that began after it,
        or by this loop's end. What a checkpoint acknowledged is committed right after it:
        Faust's own commit timer would leave it uncommitted up to another interval."""
        settlement, loop = self.consumer.settlement, asyncio.get_running_loop()
        began = loop.time()
        try:
            while True:
                covered = await settlement.asked(until_due(began, loop.time(), self.interval))
                began = loop.time()
                try:
                    acknowledged = await self.checkpoint()
                finally:
                    await settlement.answer(covered)
                if acknowledged:
                    await self._commit()
        finally:
            await settlement.close()

    async def _commit(self) -> None:
        """Faust's commit (one at a time; R3 says what it may commit). A commit that fails
        is Faust's next timer commit's to make: the loop must go on checkpointing."""
        try:
            await self.consumer.commit()
        except Exception as exc:
            logs.event("commit_failed", logging.WARNING, error=f"{type(exc).__name__}: {exc}")

"""Batches of applied records on their way to being committable.

The agent applies records one at a time into the open batch and seals it when it is full,
or as soon as no earlier batch is still being sent. In the background, while the agent
applies the next records:

1. each sealed batch's turn revisions, dead letters and re-keyed records are handed to the
   producer (after the previous batch's, so a turn's revisions stay in order) and
   acknowledged by the broker;
2. at a checkpoint (every ``interval`` seconds, and before a rebalance or a stop) every
   session changed since the last checkpoint is serialized, at once, and once the batches
   sealed so far are through step 1, written to the tables (each session once) and its
   changelog records acknowledged;
3. then those batches' events are marked applied and acknowledged to Faust, which may then
   commit their offsets.

So a state on the changelog never names a record whose emissions are not on the broker, and
an offset is never committed before its record's state is on the changelog. Writing a
session once per checkpoint rather than once per batch keeps the changelog from outgrowing
the input. A failure in any step stops the worker: nothing after the last checkpoint is
acknowledged, and it is read again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from faust.types import Message

from stream_app.checkpointing.consumer import Consumer
from stream_app.core.records import Outputs
from stream_app.state.sessions import TableSessions

IN_FLIGHT = 4  # sealed batches being sent at once before the agent waits for the oldest


@dataclass
class Batch:
    messages: list[Message] = field(default_factory=list)
    emitted: list[tuple[Outputs, float | None]] = field(default_factory=list)  # + timestamp
    forward: list[tuple[bytes, bytes, int, float]] = field(default_factory=list)


Send = Callable[[Batch], Awaitable[list[Awaitable[Any]]]]  # hands a batch to the producer


class Checkpoints:
    def __init__(
        self,
        store: TableSessions,
        tables: list[Any],
        consumer: Consumer,
        send: Send,
        observe: Callable[[Batch], None],
        crash: Callable[[BaseException], Awaitable[None]],
        interval: float,
    ) -> None:
        self.store = store
        self.tables = tables
        self.consumer = consumer
        self.send = send
        self.observe = observe
        self.crash = crash
        self.interval = interval
        self.open = Batch()
        self._handed: asyncio.Future[None] | None = None  # the last batch's sends enqueued
        self._sending: list[asyncio.Task[None]] = []  # step 1, oldest first
        self._sealed: list[Batch] = []  # since the last checkpoint, in order
        self._writing = asyncio.Lock()
        self._timer: asyncio.Task[None] | None = None

    def add(self, message: Message) -> Batch:
        self.open.messages.append(message)
        return self.open

    async def added(self, full: int) -> None:
        """After a run of records is applied: seals the open batch when it is full, or at once
        when no batch is being sent (a record waits for no other); otherwise the batch grows
        until the one being sent is acknowledged, which seals it."""
        if self._timer is None:
            self._timer = asyncio.create_task(self._every_interval())
        if len(self.open.messages) >= full:
            self.seal_now()
            while len(self._in_flight()) > IN_FLIGHT:
                await asyncio.wait([self._sending[0]])
        elif not self._in_flight():
            self.seal_now()

    def seal_now(self) -> None:
        batch, self.open = self.open, Batch()
        if not batch.messages and not batch.emitted:
            return
        handed = asyncio.get_running_loop().create_future()
        previous, self._handed = self._handed, handed
        before = self._sending[-1] if self._sending else None
        task = asyncio.create_task(self._send(batch, previous, handed, before))
        self._in_flight().append(task)
        self._sealed.append(batch)

    async def checkpoint(self) -> None:
        """Steps 2 and 3 for every batch sealed since the last checkpoint."""
        async with self._writing:
            self.seal_now()
            batches, self._sealed = self._sealed, []
            snapshot = self.store.seal()
            last = self._sending[-1] if self._sending else None
            if last is not None:  # step 1 of these batches (each waits for the one before)
                await asyncio.wait([last])
                last.result()
            try:
                await self.store.write(snapshot)
                for table in self.tables:
                    await table.written()
            except BaseException as exc:
                await self.crash(exc)
                raise
            self.store.settled(snapshot)
            for batch in batches:
                for message in batch.messages:
                    self.consumer.applied(message)
                    self.consumer.ack(message)

    def _in_flight(self) -> list[asyncio.Task[None]]:
        """The batches still in step 1, oldest first; a failed one raises here."""
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
        try:
            if previous is not None:
                await previous
            try:
                acks = await self.send(batch)
            finally:
                handed.set_result(None)
            await asyncio.gather(*acks)
            if before is not None:
                await before  # batches enter step 2 in order
        except BaseException as exc:
            await self.crash(exc)
            raise
        self.observe(batch)
        # What the batch sent is on the broker: until its checkpoint only its events are
        # needed, not a second of turns and re-keyed records held in memory.
        batch.emitted.clear()
        batch.forward.clear()
        if self.open.messages or self.open.emitted:
            self.seal_now()  # what arrived while this batch was being sent

    async def _every_interval(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.checkpoint()

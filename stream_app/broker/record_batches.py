"""Records handed to the producer a record batch at a time, one acknowledgement a batch.

``producer.send`` costs, for every record, a partitioner call, a metadata wait, an
accumulator lookup and a future resolved by a callback, and Faust's ``Topic.send`` adds
its own on top; a checkpoint sends tens of thousands. Here records are appended to an
aiokafka ``BatchBuilder`` of their topic partition, in C, and a batch is handed over
(``send_batch``) when full or when the owner asks for them all.
A partition's records reach the broker in the order they were appended: its batches are
handed over in order, and the producer sends one batch of a partition at a time.

A batch is compressed as it is handed over (``BatchBuilder._build``, which the producer's
sender would otherwise call for every batch of a request in one step of the event loop,
holding it for a whole checkpoint's changelog batches), the loop given back between two
(``runtime/slices.py``). The producers of this app are never idempotent (at-least-once), which is
when aiokafka would still stamp a batch before building it.

A batch of more than ``BUILT_ASIDE_BYTES`` is built in a thread of its own, while the loop
goes on: zstd (cramjam) lets go of the GIL while it compresses, so the main thread does
not pay for compressing each input record's turns and changelog records. A partition's
batches are still handed over one after the other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import cast

from aiokafka import AIOKafkaProducer
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.structs import RecordMetadata
from faust.types import TP, ProducerT

from stream_app.runtime.slices import Slices

# Batches past this size are built in ``_BUILDER``'s thread: below it, handing one to the
# thread and back costs more than the compression it saves the loop (docs/benchmarks.md).
BUILT_ASIDE_BYTES = 4096
_BUILDER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="record-batches")


@dataclass(frozen=True, slots=True)
class Delivery:
    """A batch handed to the producer: where it goes, how many records, and when it is in."""

    tp: TP
    records: int
    acknowledged: asyncio.Future[RecordMetadata]

    async def last_offset(self) -> int:
        """Once the broker has the batch: the offset of its last record (the broker
        answers with the batch's first)."""
        meta = await self.acknowledged
        return int(meta.offset) + self.records - 1


def aiokafka_producer(producer: ProducerT) -> AIOKafkaProducer:
    """The aiokafka producer under Faust's, once Faust has started it (its
    ``_ensure_producer``, pinned in ``checkpointing/pins.py``)."""
    return cast(AIOKafkaProducer, producer._ensure_producer())  # type: ignore[attr-defined]


class RecordBatches:
    """Open record batches by topic partition, and the deliveries of those handed over."""

    def __init__(self, producer: Callable[[], AIOKafkaProducer]) -> None:
        self._producer = producer  # asked when needed: Faust starts its producer late
        self._open: dict[TP, BatchBuilder] = {}
        self.handed: list[Delivery] = []

    async def append(
        self,
        tp: TP,
        key: bytes | None,
        value: bytes | None,
        timestamp_ms: int | None = None,
        headers: Sequence[tuple[str, bytes]] | None = None,
    ) -> None:
        batch = self._open.get(tp) or self._new_batch(tp)
        while batch.append(key=key, value=value, timestamp=timestamp_ms, headers=headers) is None:
            await self._hand_over(tp)  # full; a new batch's first record always fits
            batch = self._new_batch(tp)

    def _new_batch(self, tp: TP) -> BatchBuilder:
        batch = self._open[tp] = self._producer().create_batch()
        return batch

    async def hand_over_all(self) -> list[Delivery]:
        """Hands every open batch to the producer; the deliveries since the last call."""
        pause = Slices()
        for tp in list(self._open):
            await self._hand_over(tp)
            await pause()
        handed, self.handed = self.handed, []
        return handed

    async def _hand_over(self, tp: TP) -> None:
        batch = self._open.pop(tp)
        # Compressed now, not with the rest of a request; a large batch in a thread.
        if batch.size() > BUILT_ASIDE_BYTES:
            await asyncio.get_running_loop().run_in_executor(_BUILDER, batch._build)
        else:
            batch._build()
        acknowledged = await self._producer().send_batch(batch, tp.topic, partition=tp.partition)
        self.handed.append(Delivery(tp, batch.record_count(), acknowledged))

"""Records on their way to the broker, gathered into one batch per topic partition.

aiokafka's ``send`` costs a coroutine, a future and a queue lookup per record. The worker
knows every record's partition before it sends, so it fills one batch per partition and
waits on one future per batch (``create_batch`` / ``send_batch``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaProducer


@dataclass(frozen=True, slots=True)
class Sent:
    topic: str
    partition: int
    records: int
    delivered: asyncio.Future[Any]  # resolves to the batch's metadata (its base offset)

    async def next_offset(self) -> int:
        """The offset after this batch's last record, once the broker has it."""
        return int((await self.delivered).offset) + self.records


class Outbox:
    def __init__(self, producer: AIOKafkaProducer) -> None:
        self.producer = producer
        self._open: dict[tuple[str, int], tuple[Any, int]] = {}  # batch, records in it
        self._sent: list[Sent] = []

    async def add(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        timestamp_ms: int | None = None,
    ) -> None:
        where = (topic, partition)
        batch, records = self._open.get(where) or (self.producer.create_batch(), 0)
        if batch.append(key=key, value=value, timestamp=timestamp_ms) is None:  # full
            await self._send(topic, partition, batch, records)
            batch, records = self.producer.create_batch(), 0
            batch.append(key=key, value=value, timestamp=timestamp_ms)  # a first one fits
        self._open[where] = (batch, records + 1)

    async def send(self) -> list[Sent]:
        """Hands every open batch to the producer: what was sent since the last call."""
        for (topic, partition), (batch, records) in self._open.items():
            await self._send(topic, partition, batch, records)
        self._open.clear()
        sent, self._sent = self._sent, []
        return sent

    async def _send(self, topic: str, partition: int, batch: Any, records: int) -> None:
        delivered = await self.producer.send_batch(batch, topic, partition=partition)
        self._sent.append(Sent(topic, partition, records, delivered))

"""Record batches handed to the producer (``stream_app/broker/record_batches.py``), against a
producer that notes what it is handed: no broker is needed to see the order and the build."""

from __future__ import annotations

import asyncio
import threading
from functools import partial
from typing import Any, cast

import pytest
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.record.default_records import DefaultRecordBatch
from faust.types import TP

import stream_app.broker.record_batches as module
from stream_app.broker.record_batches import RecordBatches
from tests.event_loop import beside_another_task, slices_of_nothing

ZSTD = 4  # aiokafka's codec number


class Producer:
    """``create_batch`` and ``send_batch`` of aiokafka's producer, noting each batch."""

    def __init__(self, batch_size: int = 16384) -> None:
        self.batch_size = batch_size
        self.handed: list[tuple[TP, bool, list[bytes | None]]] = []  # tp, built, values
        self.log: list[str] = []

    def create_batch(self) -> BatchBuilder:
        return BatchBuilder(self.batch_size, ZSTD)

    async def send_batch(self, batch: BatchBuilder, topic: str, partition: int) -> Any:
        built = batch._buffer is not None  # compressed before it was handed over
        values = [r.value for r in DefaultRecordBatch(bytes(batch._build()))]
        self.handed.append((TP(topic, partition), built, values))
        self.log.append("handed")
        acknowledged = asyncio.get_running_loop().create_future()
        acknowledged.set_result(None)
        return acknowledged


def batches(producer: Producer) -> RecordBatches:
    return RecordBatches(lambda: cast(Any, producer))


def test_records_reach_the_producer_in_the_order_appended_a_full_batch_at_a_time() -> None:
    producer = Producer(batch_size=512)
    values = [b"%04d" % i + b"x" * 90 for i in range(20)]

    async def run() -> None:
        records = batches(producer)
        for value in values:
            await records.append(TP("t", 0), b"k", value)
        handed = await records.hand_over_all()  # every batch since the last call
        assert [d.records for d in handed] == [len(got) for _, _, got in producer.handed]

    asyncio.run(run())
    assert len(producer.handed) > 1  # full batches went before the last
    assert [v for _, _, got in producer.handed for v in got] == values


def test_a_batch_is_compressed_before_it_is_handed_to_the_producer() -> None:
    # The producer's sender builds every batch of a request in one step of the event loop
    # (zstd: a checkpoint's batches held it 7-32 ms); built here, one batch a step.
    producer = Producer()

    async def run() -> None:
        records = batches(producer)
        for partition in range(3):
            await records.append(TP("t", partition), b"k", b"v" * 1000)
        await records.hand_over_all()

    asyncio.run(run())
    assert [built for _, built, _ in producer.handed] == [True, True, True]


def test_handing_over_gives_the_event_loop_back_between_two_batches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slices_of_nothing(monkeypatch, module)
    producer = Producer()

    async def run() -> None:
        records = batches(producer)
        for partition in range(3):
            await records.append(TP("t", partition), b"k", b"v")
        note = partial(producer.log.append, "other task")
        await beside_another_task(records.hand_over_all(), note)

    asyncio.run(run())
    steps = " ".join(producer.log).split("other task")
    assert producer.log.count("handed") == 3
    assert all(step.count("handed") <= 1 for step in steps), producer.log


def test_a_large_batch_is_built_in_a_thread_while_the_event_loop_goes_on() -> None:
    # zstd lets go of the GIL while it compresses: a large batch is built aside, and the
    # loop runs other tasks meanwhile; a small one is built in place (the thread's round
    # trip would cost more).
    builders: list[tuple[int, str]] = []
    real = BatchBuilder._build

    def build(self: BatchBuilder) -> Any:
        builders.append((self.size(), threading.current_thread().name))
        return real(self)

    producer = Producer(batch_size=1 << 20)

    async def run() -> None:
        records = batches(producer)
        await records.append(TP("t", 0), b"k", b"v" * (module.BUILT_ASIDE_BYTES + 1))
        await records.append(TP("t", 1), b"k", b"v")
        await records.hand_over_all()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(BatchBuilder, "_build", build)
        asyncio.run(run())
    (large, large_thread), (small, small_thread) = builders[0], builders[-1]
    assert large > module.BUILT_ASIDE_BYTES and large_thread.startswith("record-batches")
    assert small < module.BUILT_ASIDE_BYTES and small_thread == threading.main_thread().name
    assert producer.handed[0][2] == [b"v" * (module.BUILT_ASIDE_BYTES + 1)]

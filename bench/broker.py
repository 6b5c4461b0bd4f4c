"""``python -m bench --broker``: the embedded broker's CPU at a steady rate, no worker.

One producer sends records of the workload's mean size at a fixed rate to a topic of four
partitions and one consumer reads them back, as the worker's input and a reader of its
turns do; the broker's cores are sampled every second. A broker whose cost per request does
not depend on what its partitions hold would show a flat line. tansu's in-memory storage
does not: its cost grows with the record batches a partition holds (a partition of 20,000
one-record batches took it to a full core at once; 100,000 records in a few large batches
did not), so every measurement over a run on it, the worker's latency among them, also
carries a broker that slows as the run goes on (``docs/benchmarks.md``, fifth round).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from bench.cpu import CpuTimeline, ends
from stream_app.embedded_broker import EmbeddedBroker

PARTITIONS = 4


async def measure(rate: int, seconds: int, size: int, fetch_wait_ms: int) -> list[float]:
    """The broker's cores, one figure a second, with ``rate`` records of ``size`` bytes a
    second produced and read back for ``seconds``."""
    topic = f"g-{uuid.uuid4().hex[:6]}"
    value = b"x" * size
    with EmbeddedBroker() as broker:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=broker.bootstrap,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=fetch_wait_ms,
        )
        await producer.start()
        await consumer.start()

        async def read() -> None:
            while True:
                await consumer.getmany(timeout_ms=100)

        reading = asyncio.create_task(read())
        try:
            with CpuTimeline({"broker": broker.pid}) as timeline:
                started = time.monotonic()
                for n in range(rate * seconds):
                    await producer.send(topic, value, partition=n % PARTITIONS)
                    delay = started + (n + 1) / rate - time.monotonic()
                    if delay > 0:
                        await asyncio.sleep(delay)
                await producer.flush()
        finally:
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reading
            await producer.stop()
            await consumer.stop()
    return timeline.cores["broker"]


def report(cores: list[float], rate: int, size: int) -> str:
    first, last = ends(cores)
    growth = f"{last / first:.2f}x" if first else "n/a"
    return (
        f"broker cores each second at {rate:,} records/s of {size} bytes in and out:\n"
        + " ".join(f"{c:.2f}" for c in cores)
        + f"\nfirst 5 s {first:.2f}, last 5 s {last:.2f}: {growth}"
        + (" (grows with what it holds)" if last > 1.2 * first else "")
    )

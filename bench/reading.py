"""A reader of a whole topic from its start, as the benchmark reads every output topic."""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer, TopicPartition


async def from_the_start(
    bootstrap: str, topic: str, partitions: int, fetch_wait_ms: int
) -> AIOKafkaConsumer:
    """A started consumer assigned every partition of ``topic``, at its beginning."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        max_partition_fetch_bytes=4 * 1048576,
        fetch_max_wait_ms=fetch_wait_ms,
    )
    await consumer.start()
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    await consumer.seek_to_beginning(*tps)
    return consumer

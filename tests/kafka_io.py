"""An independent Kafka client (librdkafka, via confluent-kafka) for end-to-end tests."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import orjson
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from stream_app.ingest.lines import record_value


def create_topics(bootstrap: str, names: Iterable[str], partitions: int, **config: str) -> None:
    """``config``: more librdkafka settings (the connection's security, say)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **config})
    futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names])
    for future in futures.values():
        future.result(10)


def publish(
    bootstrap: str, lines: Iterable[dict[str, Any]], topics: dict[str, str], **config: str
) -> int:
    """Produces replay-format lines (``topics`` maps messages/decisions to topic names)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    count = 0
    for line in lines:
        value = line["value"]
        raw = record_value(value)
        key = None if line["key"] is None else line["key"].encode()
        producer.produce(topics[line["topic"]], raw, key)
        count += 1
        if count % 10_000 == 0:
            producer.flush()
    assert producer.flush(30) == 0
    return count


def from_the_start(bootstrap: str, topic: str, partitions: int, group: str) -> Consumer:
    """A consumer assigned every partition of ``topic`` from offset 0; it commits nothing."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    return consumer


class TopicReader:
    """Reads every partition of a topic from the start; ``poll`` drains what has arrived."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.consumer = from_the_start(bootstrap, topic, partitions, "test-reader")
        self.records: list[tuple[int, bytes | None, bytes | None]] = []

    def poll(self, seconds: float = 0.2) -> int:
        batch = self.consumer.consume(10_000, seconds)
        for msg in batch:
            if msg.error() is None:
                self.records.append((msg.partition(), msg.key(), msg.value()))
        return len(batch)

    def wait_until(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}")
            self.poll()

    def values(self) -> list[dict[str, Any]]:
        return [orjson.loads(v) for _, _, v in self.records if v is not None]

    def close(self) -> None:
        self.consumer.close()


def final_turns(reader: TopicReader) -> dict[str, dict[str, Any]]:
    """The last revision per key, as a compacted topic would keep it."""
    return {
        key.decode(): orjson.loads(value)
        for _, key, value in reader.records
        if key is not None and value is not None
    }

"""Recovery reads a changelog partition to its true end (``state/recovery.py``)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from faust.types import TP

from stream_app.broker.embedded import EmbeddedBroker
from stream_app.state.recovery import fetched_ends
from tests.kafka_io import create_topics

pytestmark = pytest.mark.broker


def test_the_end_is_the_fetch_high_watermark_when_listoffsets_answers_short(
    broker: EmbeddedBroker,
) -> None:
    topic = f"changelog-{uuid.uuid4().hex[:8]}"
    create_topics(broker.bootstrap, [topic], 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50})
    for i in range(10):  # one batch of several records, as a busy worker writes them
        producer.produce(topic, f"v{i}".encode(), f"k{i}".encode(), partition=0)
    assert producer.flush(10) == 0
    lister = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lister"})
    _, listed = lister.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    lister.close()
    # Faust's recovery stops at ListOffsets "latest", which the test broker answers with
    # the last batch's first offset + 1 (BROKER-NOTES.md); a fetch knows the real end.
    ends = asyncio.run(fetched_ends(broker.bootstrap, {TP(topic, 0): max(0, listed - 1)}))
    assert ends == {TP(topic, 0): 10}
    print(f"listed end {listed}, fetched end {ends[TP(topic, 0)]}")
    assert listed <= 10

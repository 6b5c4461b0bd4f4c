"""Issue 44 item 1: an input topic deleted and made again under a worker (docs/semantics.md,
"Restarts"; rule R14 of ``checkpointing/consumer.py``).

The worker's position in each partition of the old topic lies beyond the end of the new
one. Every record of the new topic must still be applied (those below a session's applied
offset counted as ``offsets_restarted``), the event logged once per partition and counted,
and the worker must stay live. The broker (tansu) answers a fetch beyond a partition's end
with no records and the partition's high watermark; Apache Kafka answers it with
OFFSET_OUT_OF_RANGE, after which aiokafka reads the partition from its start (the test of
the drain loop, ``tests/checkpointing/test_log_restart.py``, covers that path)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTP
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.structs import OffsetAndMetadata
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from bench.workload import generate
from stream_app.broker.embedded import EmbeddedBroker
from tests.factories import assistant, message
from tests.kafka_io import create_topics, final_turns
from tests.test_app import PARTITIONS, Pipeline, replayed
from tests.test_metrics import scrape
from tests.worker_process import WorkerProcess

pytestmark = pytest.mark.broker


def before() -> list[dict[str, Any]]:
    """About 250 records a partition: the worker's position in the old topic."""
    lines = generate(records=1200, sessions=12, seed=3)
    return [line for line in lines if line["topic"] == "messages"]


def after(session: str) -> list[dict[str, Any]]:
    """What the new topic gets, about 50 records a partition: first a call of ``session``,
    a session of the old topic (its partition's offsets 0 and 1, below the session's
    applied offset and stamped later: offsets restarted), then sessions of their own."""
    call = [
        message(session, text="asked after the topic was made again"),
        assistant(session, text="answered", message_id="after-the-move"),
    ]
    fresh = generate(records=240, sessions=4, seed=5)
    renamed = [
        orjson.loads(orjson.dumps(line).replace(b"sess-", b"next-"))
        for line in fresh
        if line["topic"] == "messages"
    ]
    return [{"topic": "messages", "key": session, "value": v} for v in call] + renamed


def the_old_topic_on_a_worker(
    pipeline: Pipeline,
) -> tuple[WorkerProcess, list[dict[str, Any]], dict[str, Any], Counter[Any]]:
    """A worker started and the old topic's records published, their turns out; the worker,
    what the new topic will get, and replay's turns and dead letters of old and new."""
    old = before()
    new = after(old[-1]["key"])
    expected, expected_letters = replayed(old + new, pipeline.topics)
    worker = pipeline.worker()
    worker.start().wait_ready()
    pipeline.publish(old)
    old_turns, _ = replayed(old, pipeline.topics)
    pipeline.turns.wait_until(lambda: len(final_turns(pipeline.turns)) >= len(old_turns), 60, "")
    return worker, new, expected, expected_letters


def make_again(broker: EmbeddedBroker, topic: str) -> None:
    """Deletes ``topic``, waits until the broker no longer lists it, and makes it again."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.delete_topics([topic]).values():
        future.result(10)
    deadline = time.monotonic() + 10
    while topic in admin.list_topics(timeout=5).topics:
        assert time.monotonic() < deadline, f"{topic} still listed 10 s after its deletion"
        time.sleep(0.05)
    create_topics(broker.bootstrap, [topic], PARTITIONS)


def committed(broker: EmbeddedBroker, group: str, topic: str) -> list[TopicPartition]:
    """The group's committed offsets of ``topic``, asked without joining the group."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        return list(consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 10))
    finally:
        consumer.close()


class AsFaust(RoundRobinPartitionAssignor):
    """A plain assignor under the name of Faust's, which the group was made with."""

    name = "faust"


async def commit_as_a_member(
    broker: EmbeddedBroker, group: str, offsets: list[TopicPartition]
) -> None:
    """Commits ``offsets`` for ``group`` as a member of it (tansu refuses a commit from
    outside the group), the worker being stopped."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        enable_auto_commit=False,
        session_timeout_ms=2000,
        heartbeat_interval_ms=500,
        rebalance_timeout_ms=2000,
        partition_assignment_strategy=(AsFaust,),
    )
    await consumer.start()
    try:
        consumer.subscribe([offsets[0].topic])
        async with asyncio.timeout(30):
            while not consumer.assignment():
                await consumer.getmany(timeout_ms=100, max_records=1)  # no seek: records stay
        await consumer.commit(
            {AioTP(tp.topic, tp.partition): OffsetAndMetadata(tp.offset, "") for tp in offsets}
        )
    finally:
        await consumer.stop()


def log_events(worker: WorkerProcess, name: str) -> list[dict[str, Any]]:
    return [
        orjson.loads(line)
        for line in worker.log.read_text().splitlines()
        if line.startswith('{"') and f'"event":"{name}"' in line
    ]


def counted(worker: WorkerProcess, name: str, **labels: str) -> float:
    return scrape(worker.port).get((name, tuple(sorted(labels.items()))), 0.0)


def test_a_topic_made_again_under_a_running_worker_is_read_from_its_start(
    pipeline: Pipeline,
) -> None:
    topic = pipeline.topics["STREAM_APP_TOPIC_MESSAGES"]
    worker, new, expected, expected_letters = the_old_topic_on_a_worker(pipeline)

    make_again(pipeline.broker, topic)
    pipeline.publish(new)
    pipeline.wait_for(expected, expected_letters, timeout=60)

    assert worker.status("/health") == 200
    restarted = log_events(worker, "partition_restarted")
    assert sorted(e["partition"] for e in restarted) == list(range(PARTITIONS))  # once each
    for event in restarted:
        assert event["topic"] == topic and event["log_start"] == 0
        assert event["position"] > event["log_end"]
    assert counted(worker, "stream_app_partitions_restarted_total", topic=topic) == PARTITIONS
    # The old session's call: its first record, below the session's applied offset; the
    # session's applied offset is the new log's from there on.
    assert counted(worker, "stream_app_offsets_restarted_total") == 1
    # The new topic's offsets are committed from its start on, not from the old position.
    deadline = time.monotonic() + 30
    while True:
        offsets = committed(pipeline.broker, pipeline.topics["STREAM_APP_ID"], topic)
        if sum(tp.offset for tp in offsets if tp.offset >= 0) == len(new):  # each to its end
            break
        assert time.monotonic() < deadline, f"committed {offsets}, {len(new)} records in all"
        time.sleep(0.2)


def test_a_worker_started_on_a_topic_made_again_below_its_commit_reads_it_from_its_start(
    pipeline: Pipeline,
) -> None:
    # While the topic is gone, aiokafka retries a commit refused as UnknownTopicOrPartition;
    # one that lands once the topic is back leaves the old position committed on the new
    # topic, beyond its end. A worker started then seeks there.
    topic = pipeline.topics["STREAM_APP_TOPIC_MESSAGES"]
    group = pipeline.topics["STREAM_APP_ID"]
    worker, new, expected, expected_letters = the_old_topic_on_a_worker(pipeline)
    worker.stop()  # commits what it applied
    stale = committed(pipeline.broker, group, topic)
    assert all(tp.offset > 100 for tp in stale), stale

    make_again(pipeline.broker, topic)
    pipeline.publish(new)
    asyncio.run(commit_as_a_member(pipeline.broker, group, stale))  # the retried commit
    assert [tp.offset for tp in committed(pipeline.broker, group, topic)] == [
        tp.offset for tp in stale
    ]

    restarted = pipeline.worker()  # the same name: its state, from its data directory
    restarted.start().wait_ready()
    pipeline.wait_for(expected, expected_letters, timeout=60)
    events = log_events(restarted, "partition_restarted")
    assert sorted(e["partition"] for e in events) == list(range(PARTITIONS))
    assert counted(restarted, "stream_app_offsets_restarted_total") == 1

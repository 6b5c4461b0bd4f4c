"""The worker: the core over Kafka (SPEC §1, §5), one batch of records at a time.

One consumer group reads the two input topics and the internal ``<id>-sessions`` topic.
An input record is decoded (or dead-lettered) and re-keyed by session id onto the sessions
topic, so one worker owns all of a session; a sessions record is applied to its session's
state, which lives in memory and in the ``<id>-sessions-changelog`` topic. An input record
that is already on its session's partition (its producer keyed it by session id with
Kafka's default partitioner) is applied at once, without the trip through the sessions
topic, when the input topic has as many partitions as the state.

Three steps, each waiting for the broker before the next starts:

1. each batch's turn revisions, dead letters and re-keyed inputs are produced and
   acknowledged before the next batch is applied;
2. at a checkpoint (every ``STREAM_APP_COMMIT_INTERVAL_MS``, on a rebalance, on stop) every
   session changed since the last one is written to the changelog, once;
3. then the offsets of every batch up to the checkpoint are committed.

So a worker killed anywhere re-reads what came after its last checkpoint: its re-keyed
inputs arrive again and its sessions records are recognised by the core as already applied
(each input carries its source offset), so nothing is lost and a retry never counts twice.
Delivery is at-least-once: the test broker has no transactions. Writing a session once per
checkpoint rather than once per batch keeps the changelog from outgrowing the input: a long
session's state is kilobytes.

Faust's per-event streams cost more than this whole loop (``bench/``, README "Performance");
its table changelog and recovery protocol are kept, written out in ``state/changelog.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import time
from collections.abc import Awaitable
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import CommitFailedError, TopicAlreadyExistsError
from aiokafka.structs import ConsumerRecord, TopicPartition

from stream_app import logs, metrics
from stream_app.config import Settings
from stream_app.core.dead_letter import original_key
from stream_app.core.intake import decode
from stream_app.core.records import Outputs, SourceRecord, TopicKind, dump_input, load_input
from stream_app.models.topics import partition_for
from stream_app.outbox import Outbox
from stream_app.owners import Owners
from stream_app.pipeline import Pipeline
from stream_app.state.changelog import Capture, ChangelogStore

Emitted = list[tuple[Outputs, float | None]]  # with the produce time of the causing record
CAPTURE_STEP = 100  # sessions serialized at a time by a checkpoint: ~1 ms of the loop


class Worker:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.policy = settings.policy()
        self.partitions = settings.partitions
        self.sessions_topic = f"{settings.id}-sessions"
        self.changelog_topic = f"{settings.id}-sessions-changelog"
        self.kinds: dict[str, TopicKind] = {
            settings.topic_messages: "messages",
            settings.topic_decisions: "decisions",
        }
        self.store = ChangelogStore(self.partitions)
        self.owners = Owners(f"http://{settings.web_host}:{settings.web_port}", self.sessions_topic)
        self.lock = asyncio.Lock()  # a batch, a sweep or a rebalance: one at a time
        self.ready = False
        self.stopping = False
        self.last_read: dict[TopicPartition, int] = {}  # input partition -> offset, for lag
        # Applied and emitted, not yet committed: the next checkpoint's (with the store's
        # changed sessions).
        self.uncommitted: dict[TopicPartition, int] = {}
        self.next_checkpoint = 0.0
        self.settling: asyncio.Task[None] | None = None  # the latest checkpoint's steps 2, 3
        self.copartitioned: dict[str, bool] = {}  # input topic -> as many partitions as state

    # -- lifecycle ----------------------------------------------------------------------

    def connect(self) -> None:
        """The Kafka clients (aiokafka wants a running event loop to create them)."""
        settings = self.settings
        bootstrap = settings.bootstrap_servers()
        self.producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            max_batch_size=settings.producer_max_batch_size,
        )
        # A producer of its own (its own connection): a checkpoint's megabytes of state do
        # not queue in front of the next batch's turns, measured as p99 latency spikes.
        self.changelog_producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            max_batch_size=settings.producer_max_batch_size,
        )
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=settings.id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=settings.fetch_max_wait_ms,
            session_timeout_ms=int(settings.session_timeout_seconds * 1000),
            heartbeat_interval_ms=int(settings.heartbeat_interval_seconds * 1000),
            rebalance_timeout_ms=int(settings.rebalance_timeout_seconds * 1000),
            partition_assignment_strategy=(self.owners.assignor(),),
        )
        self.changelog_reader = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=50,
        )

    async def run(self) -> None:
        from stream_app.web import serve

        self.connect()
        await self.declare_topics()
        await self.producer.start()
        await self.changelog_producer.start()
        await self.changelog_reader.start()
        await self.consumer.start()
        self.consumer.subscribe([*self.kinds, self.sessions_topic], listener=_Rebalance(self))
        web = await serve(self)
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.stop, signum)
        sweeper = asyncio.create_task(self.sweep_forever())
        logs.event(
            "startup",
            app_id=self.settings.id,
            broker=self.settings.broker_url,
            org_id=self.policy.org_id,
            partitions=self.partitions,
            topics=[*self.kinds, self.settings.topic_turns, self.settings.topic_dlq],
        )
        try:
            while not self.stopping:
                batch = await self.consumer.getmany(
                    timeout_ms=200, max_records=self.settings.batch_max_records
                )
                async with self.lock:
                    if batch and not self.stopping:
                        await self.process(batch)
                    elif (self.store.changed or self.uncommitted) and (
                        time.monotonic() >= self.next_checkpoint
                    ):
                        self.checkpoint()
                if sweeper.done():
                    sweeper.result()  # a failed sweep stops the worker
        finally:
            sweeper.cancel()
            async with self.lock:
                await self.settled()
            await self.consumer.stop()  # leaves the group: the others take over at once
            await self.changelog_reader.stop()
            await self.producer.stop()
            await self.changelog_producer.stop()
            await web.cleanup()
            logs.event("shutdown", mode="graceful")

    def stop(self, signum: int) -> None:
        """Finish the batch in hand, commit it, leave the group."""
        logs.event("stopping", signal=signal.Signals(signum).name)
        self.stopping = True

    async def declare_topics(self) -> None:
        """Creates the topics that do not exist yet (the internal ones, on a first start)."""
        s = self.settings
        admin = AIOKafkaAdminClient(bootstrap_servers=s.bootstrap_servers())
        await admin.start()
        try:
            existing = set(await admin.list_topics())
            wanted = {
                s.topic_messages: {},
                s.topic_decisions: {},
                s.topic_turns: {"cleanup.policy": "compact"},
                s.topic_dlq: {},
                self.sessions_topic: {},
                self.changelog_topic: {"cleanup.policy": "compact"},
            }
            new = [
                NewTopic(name, s.partitions, s.replication_factor, topic_configs=configs)
                for name, configs in wanted.items()
                if name not in existing
            ]
            if new:
                with contextlib.suppress(TopicAlreadyExistsError):  # another worker was first
                    await admin.create_topics(new)
        finally:
            await admin.close()

    # -- a batch ------------------------------------------------------------------------

    async def process(self, batch: dict[TopicPartition, list[ConsumerRecord]]) -> None:
        assignment = self.consumer.assignment()
        pipeline = Pipeline(self.policy, self.store)
        emitted: Emitted = []
        outbox = Outbox(self.producer)
        offsets: dict[TopicPartition, int] = {}
        now = time.time()
        for tp, records in batch.items():
            if tp not in assignment:
                continue  # fetched before a rebalance took the partition away
            if tp.topic == self.sessions_topic:
                for r in records:
                    out = pipeline.apply(load_input(r.value))
                    emitted.append((out, r.timestamp / 1000))
            else:
                kind = self.kinds[tp.topic]
                # A record already on its session's partition is applied here: the worker
                # reading input partition p owns sessions partition p (same count, range
                # assignment), and whether a session's records take this path depends only
                # on the two partitions, so one input partition's order is never broken.
                direct = self.copartitioned.get(tp.topic, False)
                if direct and not self.store.owns(tp.partition):
                    raise RuntimeError(f"{tp} is assigned without its sessions partition")
                for r in records:
                    record = SourceRecord(kind, tp.topic, tp.partition, r.offset, r.key, r.value)
                    item, out = decode(record, self.policy, now)
                    if item is None:
                        emitted.append((out, None))
                        continue
                    metrics.count(out.counts)
                    key = item.session_id.encode()
                    partition = partition_for(key, self.partitions)
                    if direct and partition == tp.partition:
                        emitted.append((pipeline.apply(item), r.timestamp / 1000))
                        continue
                    await outbox.add(
                        self.sessions_topic,
                        partition,
                        key,
                        dump_input(item),
                        r.timestamp,  # travels on, for the latency histogram
                    )
                metrics.RECORDS.labels(topic=tp.topic).inc(len(records))
                self.last_read[tp] = records[-1].offset
            offsets[tp] = records[-1].offset + 1
        await self.finish(emitted, outbox, offsets)

    async def finish(
        self,
        emitted: Emitted,
        outbox: Outbox,
        offsets: dict[TopicPartition, int] | None = None,
    ) -> None:
        """Step 1; the batch's state and offsets then wait for the next checkpoint.

        Sessions change in the store as records are applied: a batch that fails here stops
        the worker, whose successor starts from the changelog, which this batch never reached.
        """
        if self.settling is not None and self.settling.done():
            self.settling.result()  # a failed write or commit stops the worker
        s = self.settings
        letters: list[Awaitable[Any]] = []
        for out, _ in emitted:
            for revision in out.turns:
                await outbox.add(
                    s.topic_turns,
                    partition_for(revision.session_id.encode(), self.partitions),
                    revision.key.encode(),
                    orjson.dumps(revision.turn),
                )
            for letter in out.dead_letters:  # rare; the topic's own partitioner spreads them
                letters.append(
                    await self.producer.send(
                        s.topic_dlq, orjson.dumps(letter), key=original_key(letter)
                    )
                )
        await asyncio.gather(*letters, *(sent.delivered for sent in await outbox.send()))
        self.observe(emitted)
        self.uncommitted.update(offsets or {})
        if time.monotonic() >= self.next_checkpoint:
            self.checkpoint()

    def checkpoint(self) -> None:
        """Steps 2 and 3 for every batch since the last checkpoint, in the background.

        A session changed by many batches is written once, as it is at this instant: every
        emission that led to it is acknowledged already. The records are serialized a few
        sessions at a time between batches (a session the next batch touches goes first,
        so what it changes cannot leak in), then sent and committed while the loop goes
        on; checkpoints settle in order.
        """
        capture = self.store.capture()
        offsets, self.uncommitted = self.uncommitted, {}
        self.settling = asyncio.create_task(self.settle(self.settling, capture, offsets))
        self.next_checkpoint = time.monotonic() + self.settings.commit_interval_ms / 1000
        # What survived to here is mostly session state, freed by reference counting when it
        # goes (it holds no cycles). Left to the cyclic collector it would be walked whole
        # every time the heap grew by a quarter: pauses of 0.3-0.7 s, measured.
        gc.freeze()

    async def settle(
        self,
        before: asyncio.Task[None] | None,
        capture: Capture,
        offsets: dict[TopicPartition, int],
    ) -> None:
        """Steps 2 and 3 of a checkpoint: its state acknowledged, then its offsets committed."""
        while capture.drain(CAPTURE_STEP):
            await asyncio.sleep(0)  # let the loop run a batch between steps
        if before is not None:
            await before
        outbox = Outbox(self.changelog_producer)
        for partition, key, value in capture.records:
            await outbox.add(self.changelog_topic, partition, key, value)
        for sent in await outbox.send():
            self.store.position[sent.partition] = await sent.next_offset()
        if offsets:
            try:
                await self.consumer.commit(offsets)
            except CommitFailedError as exc:
                # The partitions moved on; their next owner re-reads, the core skips.
                logs.event("commit_failed", logging.WARNING, error=str(exc))

    async def settled(self) -> None:
        """Waits until every batch so far is in the changelog and committed."""
        self.checkpoint()
        if self.settling is not None:
            await self.settling

    def observe(self, emitted: Emitted) -> None:
        now = time.time()
        for out, started in emitted:
            metrics.count(out.counts)
            if started is not None:
                for revision in out.turns:
                    if revision.first:
                        metrics.TURN_LATENCY.observe(max(0.0, now - started))
            for letter in out.dead_letters:
                logs.event(
                    "dead_letter",
                    logging.WARNING,
                    reason=letter["reason"],
                    source_topic=letter["source_topic"],
                    partition=letter["partition"],
                    offset=letter["offset"],
                    error=letter["error"],
                )

    # -- expiry -------------------------------------------------------------------------

    async def sweep_forever(self) -> None:
        """Expiry is also checked on every record of a session; this catches idle ones."""
        while True:
            await asyncio.sleep(self.settings.sweep_interval_seconds)
            async with self.lock:
                expired = Pipeline(self.policy, self.store).sweep()
                await self.finish([(expired, None)], Outbox(self.producer))

    # -- rebalances ---------------------------------------------------------------------

    async def revoked(self, revoked: set[TopicPartition]) -> None:
        async with self.lock:  # after the batch in hand is committed
            await self.settled()
            self.ready = False
            self.store.release(tp.partition for tp in revoked if tp.topic == self.sessions_topic)

    async def assigned(self, assigned: set[TopicPartition]) -> None:
        async with self.lock:
            mine = {tp.partition for tp in assigned if tp.topic == self.sessions_topic}
            self.copartitioned = {
                topic: len(self.consumer.partitions_for_topic(topic) or ()) == self.partitions
                for topic in self.kinds
            }
            logs.event(
                "partitions_assigned",
                partitions=sorted(f"{self.sessions_topic}:{p}" for p in mine),
            )
            started = time.monotonic()
            read = await self.store.recover(self.changelog_reader, self.changelog_topic, mine)
            self.ready = True
            logs.event(
                "recovery_done",
                sessions=len(self.store),
                changelog_records=read,
                seconds=round(time.monotonic() - started, 3),
            )

    def lag(self) -> None:
        """Moves the lag gauge: records of each input partition not read yet."""
        for tp in self.consumer.assignment():
            if tp in self.last_read and (end := self.consumer.highwater(tp)) is not None:
                lag = max(0, end - self.last_read[tp] - 1)
                metrics.LAG.labels(topic=tp.topic, partition=str(tp.partition)).set(lag)


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self.worker.revoked(revoked)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        await self.worker.assigned(assigned)

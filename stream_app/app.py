"""The worker: a Faust app over the pure core (SPEC §1, §5).

One agent, ``assemble``, reads the two input topics and ``<id>-sessions``. An input record
is decoded (or dead-lettered) and re-keyed by session id onto ``<id>-sessions``, so one
worker owns everything of a session; a record already on its session's partition (its
producer keyed it by session id with Kafka's partitioner) is applied where it is, which
depends only on the two partitions and so keeps each input partition's order. A sessions
record is applied to its session's state in the ``sessions`` table (changelog topic
``<id>-sessions-changelog``).

Each event the agent receives stands for a run of consecutive records of one partition
(``Consumer.delivered`` gives them): Faust's per-event path (conductor, channel, stream and
a turn of the event loop) then costs once per run, which made the worker 2.5 times faster.
The agent works in batches (whatever has arrived, up to ``STREAM_APP_BATCH_MAX_RECORDS``):
it applies every record, sends the batch's turn revisions, dead letters and re-keyed
records and waits for the broker to have them, then writes each changed session once, and
only then acknowledges the batch's events. Faust commits an offset only after a run of
acknowledged events and after flushing its producer (changelog included), so a worker
killed anywhere re-reads at most what it had not finished; the core recognises a record it
has applied (its source offset is in the session's state) and a retry changes nothing.
Faust's own holes in that bookkeeping are closed in ``checkpointing/consumer.py``.

``faust -A stream_app.app worker`` and ``stream-app worker`` both run this module's ``app``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable
from typing import Any, cast

import faust
import orjson
from faust.tables.manager import TableManager
from mode.supervisors import CrashingSupervisor
from prometheus_client import generate_latest

from stream_app import heap, logs, metrics, reachability
from stream_app.checkpointing.batches import Batch, Checkpoints
from stream_app.checkpointing.consumer import (
    RUN_RECORDS,
    Consumer,
    ConsumerThread,
    RunScheduler,
    Transport,
)
from stream_app.config import Settings, load_settings
from stream_app.core.dead_letter import original_key
from stream_app.core.records import SourceRecord, TopicKind, dump_input, load_input
from stream_app.models.topics import partition_for
from stream_app.pipeline import Pipeline
from stream_app.state.recovery import (
    FetchEndTableManager,
    bootstrap_servers,
    client_options,
    partition_counts,
)
from stream_app.state.sessions import TableSessions, session_of
from stream_app.state.tables import KeyPartitionedTable
from stream_app.web_auth import requires_token

METRICS_CONTENT_TYPE = "text/plain; version=0.0.4"  # aiohttp adds the charset itself
SWEEP = b'{"sweep":true}'  # the leader's timer record on a sessions partition: expire it


class App(faust.App):
    """Faust's app with the consumer of ``checkpointing/consumer.py``."""

    def _new_transport(self) -> Transport:
        return Transport(self.conf.broker_consumer, self)


def create_app(settings: Settings) -> faust.App:
    ConsumerThread.fetch_max_wait_ms = settings.fetch_max_wait_ms
    policy = settings.policy()
    partitions = settings.partitions
    app = App(
        settings.id,
        broker=settings.broker_url,
        broker_credentials=settings.broker_credentials(),
        store=settings.store,
        datadir=str(settings.data_dir),
        web_port=settings.web_port,
        web_host=settings.web_host,
        web_bind=settings.web_bind,
        # Faust's /table/{name}/{key}/ would serve session state (chat content) past
        # STREAM_APP_WEB_TOKEN; /sessions/{id} is the way in.
        web_tables_enabled=False,
        topic_partitions=partitions,
        topic_replication_factor=settings.replication_factor,
        table_standby_replicas=settings.standby_replicas,
        broker_session_timeout=settings.session_timeout_seconds,
        broker_heartbeat_interval=settings.heartbeat_interval_seconds,
        broker_rebalance_timeout=settings.rebalance_timeout_seconds,
        broker_commit_interval=settings.commit_interval_ms / 1000,
        producer_max_batch_size=settings.producer_max_batch_size,
        # Faust sends a record at a time: without a linger every send is a request.
        producer_linger=0.005,
        producer_acks=-1,
        producer_compression_type=None if settings.compression == "none" else settings.compression,
        # The largest record the limits let a state write (turns are capped in the core).
        producer_max_request_size=policy.max_state_record_bytes,
        # The agent's queue holds runs of up to RUN_RECORDS records each (the drain loop's).
        stream_buffer_maxsize=max(1, settings.read_ahead_records // RUN_RECORDS),
        consumer_auto_offset_reset="earliest",
        key_serializer="raw",
        value_serializer="raw",
        Table=KeyPartitionedTable,
        TableManager=FetchEndTableManager,
        ConsumerScheduler=RunScheduler,
        agent_supervisor=CrashingSupervisor,  # an agent that fails stops the worker
    )

    def topic(*names: str, **options: Any) -> faust.TopicT:
        return app.topic(*names, key_type=bytes, value_type=bytes, partitions=partitions, **options)

    sessions_name = f"{settings.id}-sessions"
    kinds: dict[str, TopicKind] = {
        settings.topic_messages: "messages",
        settings.topic_decisions: "decisions",
    }
    records = topic(*kinds, sessions_name, internal=True)  # declared if missing
    sessions = topic(sessions_name, internal=True)
    turns = topic(settings.topic_turns, compacting=True)
    dead_letters = topic(settings.topic_dlq)
    table = cast(KeyPartitionedTable, app.Table("sessions", partitions=partitions))
    decisions = cast(
        KeyPartitionedTable,
        app.Table("decisions", partitions=partitions, session_of=session_of),
    )
    bodies = cast(
        KeyPartitionedTable,
        app.Table("turn_bodies", partitions=partitions, session_of=session_of),
    )
    entries = cast(
        KeyPartitionedTable,
        app.Table("entries", partitions=partitions, session_of=session_of),
    )
    store = TableSessions(table, decisions, bodies, entries, policy.max_state_record_bytes)
    pipeline = Pipeline(policy, store)

    owned: set[int] = set()  # sessions partitions of this worker (this generation)
    copartitioned: dict[str, bool] = {}  # input topic -> as many partitions as the state
    last_read: dict[Any, int] = {}  # input partition -> offset, for the lag gauge
    records_read = {name: metrics.RECORDS.labels(topic=name) for name in kinds}

    def apply_record(msg: faust.types.Message, batch: Batch) -> None:
        """One record into the core; what it emits waits in its batch."""
        if msg.topic == sessions_name:
            if msg.value is None:
                return  # nothing this app writes
            if msg.value == SWEEP:
                p = msg.partition
                due = store.due_in(p, policy, pipeline.clock())
                batch.emitted.append((pipeline.sweep(due), None))
            else:
                batch.emitted.append((pipeline.apply(load_input(msg.value)), msg.timestamp))
            return
        records_read[msg.topic].inc()
        last_read[msg.tp] = msg.offset
        kind = kinds[msg.topic]
        record = SourceRecord(kind, msg.topic, msg.partition, msg.offset, msg.key, msg.value)
        item, out = pipeline.decode(record)
        if item is None:
            batch.emitted.append((out, None))
            return
        metrics.count(out.counts)
        key = item.session_id.encode()
        partition = partition_for(key, partitions)
        if partition == msg.partition and partition in owned and copartitioned.get(msg.topic):
            batch.emitted.append((pipeline.apply(item), msg.timestamp))
        else:
            # The record's own timestamp travels on, for the turn latency histogram.
            batch.forward.append((key, dump_input(item), partition, msg.timestamp))

    def _partition(session_id: str) -> int:
        return partition_for(session_id.encode(), partitions)

    async def send(batch: Batch) -> list[Awaitable[Any]]:
        """Hands a batch's emissions and re-keyed records to the producer, in order."""
        producer = app.producer
        acks: list[Awaitable[Any]] = []
        for out, _ in batch.emitted:
            for revision in out.turns:
                acks.append(
                    await producer.send(
                        settings.topic_turns,
                        revision.key_bytes,
                        revision.value,
                        _partition(revision.session_id),
                        None,
                        revision.headers,
                    )
                )
            for letter in out.dead_letters:
                acks.append(
                    await producer.send(
                        settings.topic_dlq,
                        original_key(letter),
                        orjson.dumps(letter),
                        None,
                        None,
                        None,
                    )
                )
        for key, value, partition, timestamp in batch.forward:
            acks.append(await producer.send(sessions_name, key, value, partition, timestamp, None))
        return acks

    def observe(batch: Batch) -> None:
        now = time.time()
        for out, started in batch.emitted:
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

    checkpoints: Checkpoints | None = None

    @app.agent(records)
    async def assemble(stream: faust.StreamT[bytes]) -> None:
        nonlocal checkpoints
        consumer = cast(Consumer, app.consumer)
        checkpoints = Checkpoints(
            store,
            [table, decisions, bodies, entries],
            consumer,
            send,
            observe,
            app.crash,
            interval=settings.commit_interval_ms / 1000,
        )
        consumer.settle = checkpoints.checkpoint
        async for event in stream.noack().events():  # type: ignore[attr-defined]
            for message in consumer.delivered(event.message):  # a run of one partition
                apply_record(message, checkpoints.add(message))
            await checkpoints.added(full=settings.batch_max_records)

    @app.timer(settings.sweep_interval_seconds, on_leader=True)  # type: ignore[untyped-decorator]
    async def request_sweeps() -> None:
        """Expiry is checked on every record of a session; this catches the idle ones."""
        for partition in range(partitions):
            await sessions.send(key=None, value=SWEEP, partition=partition)

    @app.timer(heap.INTERVAL)  # type: ignore[untyped-decorator]
    async def give_back_memory() -> None:
        """An idle worker also drops what only speeds up work: the decoded states (in the
        tables) and the cached partitions of session keys."""
        if store.forget_if_idle():
            partition_for.cache_clear()
        heap.give_back()

    @app.page("/health")
    async def health(web: Any, request: Any) -> Any:
        """Live while the event loop answers."""
        return web.json({"status": "live"})

    watch = reachability.Watch(settings.bootstrap_servers(), settings.kafka_options())

    @app.timer(reachability.WATCH_INTERVAL)  # type: ignore[untyped-decorator]
    async def watch_broker() -> None:
        await watch.check()

    @app.page("/ready")
    async def ready(web: Any, request: Any) -> Any:
        """Ready once table recovery has finished, while no rebalance is under way and the
        cluster answers."""
        recovered = cast(TableManager, app.tables).recovery.completed.is_set()
        ok = recovered and not app.rebalancing and watch.reachable
        return web.json(
            {"ready": ok, "broker": "reachable" if watch.reachable else "unreachable"},
            status=200 if ok else 503,
        )

    @app.page("/metrics")
    async def metrics_page(web: Any, request: Any) -> Any:
        metrics.SESSIONS.set(len(store))
        assigned = app.consumer.assignment()
        for tp in [tp for tp in last_read if tp not in assigned]:
            del last_read[tp]  # moved to another worker, which reports its lag now
        metrics.LAG.clear()
        for tp in assigned:
            if tp in last_read and (highwater := app.consumer.highwater(tp)) is not None:
                lag = max(0, highwater - last_read[tp] - 1)
                metrics.LAG.labels(topic=tp.topic, partition=str(tp.partition)).set(lag)
        return web.bytes(generate_latest(metrics.REGISTRY), content_type=METRICS_CONTENT_TYPE)

    @app.page("/sessions/{session_id}")
    @requires_token(settings.web_token)  # before the routing: a forwarded request keeps it
    @app.table_route(table=table, match_info="session_id")
    async def session_state(web: Any, request: Any, session_id: str) -> Any:
        """One session's state, answered by the worker that owns it."""
        state = store.peek(session_id)
        if state is None:
            return web.json({"error": f"no state for session {session_id!r}"}, status=404)
        return web.bytes(state.to_json(), content_type="application/json")

    # Faust's signal stubs do not describe receivers that take the signal's arguments.
    @app.on_partitions_assigned.connect  # type: ignore[arg-type]
    async def on_assigned(app: faust.App, assigned: set[Any], **kwargs: Any) -> None:
        owned.clear()
        owned.update(tp.partition for tp in assigned if tp.topic == sessions_name)
        store.forget_all()  # partitions may have moved and back: the tables rule
        if not copartitioned:
            # Asked once: which path a record takes must never change for a topic. A record
            # forwarded and not yet applied would come after later records of its partition
            # applied in place, and the core would take it for one it had applied.
            counts = await partition_counts(
                bootstrap_servers(app), list(kinds), **client_options(app)
            )
            copartitioned.update({name: n == partitions for name, n in counts.items()})
        logs.event(
            "partitions_assigned",
            partitions=sorted(f"{sessions_name}:{p}" for p in owned),
            applied_in_place=sorted(name for name, same in copartitioned.items() if same),
        )

    @app.on_rebalance_complete.connect  # type: ignore[arg-type]
    async def on_recovered(app: faust.App, **kwargs: Any) -> None:
        logs.event("recovery_done", sessions=store.recount())

    @app.task  # type: ignore[untyped-decorator]
    async def on_startup() -> None:
        # Faust's terminal spinner handler listens at DEBUG, which keeps the root logger at
        # DEBUG: every library debug call then builds a record (~8 % of a busy worker's
        # CPU, measured with py-spy). A service has no spinner to turn.
        root = logging.getLogger()
        root.handlers[:] = [h for h in root.handlers if type(h).__name__ != "SpinnerHandler"]
        levels = [h.level for h in root.handlers if h.level]
        root.setLevel(min(levels) if levels else logging.INFO)
        for t in (turns, dead_letters):
            await t.maybe_declare()
        metrics.declare(list(kinds))
        logs.event(
            "startup",
            app_id=settings.id,
            broker=settings.broker_url,
            org_id=policy.org_id,
            partitions=partitions,
            store=settings.store,
            topics=[*kinds, settings.topic_turns, settings.topic_dlq],
        )

    return app


app = create_app(load_settings())

"""The Faust application: the core over Kafka (SPEC §1, §5).

Two agents. ``intake`` reads both input topics, decodes each record (dead-lettering the bad
ones) and re-keys it by session id onto the internal ``<id>-sessions`` topic. ``assemble``
reads that topic, so one worker owns all of one session: it folds each input into the
session's state in the ``sessions`` table and produces turn revisions and dead letters.

Delivery is at-least-once (the test broker has no transactions). Turn revisions and dead
letters are acknowledged by the broker *before* the state change that produced them is
written, and the core skips any source record it has already applied, so a worker killed
at any moment and restarted re-emits at most identical revisions and never loses one.

``faust -A stream_app.app worker`` and ``stream-app worker`` both run this module's ``app``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import AsyncIterator, Awaitable
from typing import Any, cast

import faust
import orjson
from faust.tables.manager import TableManager
from faust.transport.drivers import aiokafka as faust_aiokafka
from prometheus_client import generate_latest

from stream_app import logs, metrics
from stream_app.config import Settings, load_settings
from stream_app.core.assembler import apply
from stream_app.core.dead_letter import original_key
from stream_app.core.expiry import expire
from stream_app.core.intake import decode
from stream_app.core.records import (
    Outputs,
    SourceRecord,
    TopicKind,
    dump_input,
    load_input,
)
from stream_app.models.topics import partition_for
from stream_app.state.table import TableStore

METRICS_CONTENT_TYPE = "text/plain; version=0.0.4"  # aiohttp adds the charset itself
SWEEP = b'{"sweep":true}'  # the timer's record on the sessions topic: expire this partition


def stop_now(signum: int) -> None:
    """Stop as a crash does: no final commit.

    Faust's graceful stop commits offsets for events it acknowledged without processing (an
    agent cancelled mid-event, events dropped during the rebalance it triggers), so records
    could be lost. A crash commits nothing: the next owner reads again from the last commit
    and the core turns what was already applied into duplicates. Proven by the SIGKILL tests.
    """
    logs.event("shutdown", signal=signal.Signals(signum).name, mode="crash-only")
    os._exit(0)


def _tune_fetch_wait(max_wait_ms: int) -> None:
    """Faust hard-codes the consumer's fetch wait (1.5 s); this sets it from our settings.

    A broker that holds a fetch for the whole wait (tansu does) adds up to that much
    latency to every hop; Apache Kafka answers as soon as data arrives.
    """
    thread = faust_aiokafka.AIOKafkaConsumerThread
    create = getattr(thread, "_stream_app_create", thread._create_worker_consumer)

    def create_tuned(self: Any, transport: Any) -> Any:
        consumer = create(self, transport)
        consumer._fetch_max_wait_ms = max_wait_ms  # read when the consumer starts
        return consumer

    setattr(thread, "_stream_app_create", create)  # noqa: B010 - patched once per process
    setattr(thread, "_create_worker_consumer", create_tuned)  # noqa: B010


def create_app(settings: Settings) -> faust.App:
    _tune_fetch_wait(settings.fetch_max_wait_ms)
    policy = settings.policy()
    partitions = settings.partitions
    app = faust.App(
        settings.id,
        broker=settings.broker_url,
        store=settings.store_url,
        datadir=str(settings.data_dir),
        web_port=settings.web_port,
        web_host=settings.web_host,
        topic_partitions=partitions,
        table_standby_replicas=0,
        broker_session_timeout=settings.session_timeout_seconds,
        broker_heartbeat_interval=settings.heartbeat_interval_seconds,
        broker_rebalance_timeout=settings.rebalance_timeout_seconds,
        producer_max_batch_size=settings.producer_max_batch_size,
        consumer_auto_offset_reset="earliest",
        key_serializer="raw",
        value_serializer="raw",
        stream_wait_empty=False,
    )

    def topic(*names: str, **options: Any) -> faust.TopicT:
        return app.topic(*names, key_type=bytes, value_type=bytes, partitions=partitions, **options)

    inputs = topic(settings.topic_messages, settings.topic_decisions)
    sessions = topic(f"{settings.id}-sessions", internal=True)
    turns = topic(settings.topic_turns)
    dead_letters = topic(settings.topic_dlq)
    table = app.Table(
        "sessions", default=None, partitions=partitions, key_type=bytes, value_type=bytes
    )
    store = TableStore(table)

    last_read: dict[Any, int] = {}  # input partition -> offset, for the lag gauge

    async def send_all(out: Outputs, started: float | None = None) -> None:
        """Produce every emission and wait until the broker has them all."""
        acks: list[Awaitable[Any]] = []
        for revision in out.turns:
            acks.append(
                await turns.send(
                    key=revision.key.encode(),
                    value=orjson.dumps(revision.turn),
                    partition=partition_for(revision.session_id.encode(), partitions),
                )
            )
        for letter in out.dead_letters:
            acks.append(
                await dead_letters.send(key=original_key(letter), value=orjson.dumps(letter))
            )
        if acks:
            await asyncio.gather(*acks)
        metrics.count(out.counts)
        if started is not None:
            for revision in out.turns:
                if revision.first:
                    metrics.TURN_LATENCY.observe(max(0.0, time.time() - started))
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

    @app.agent(inputs)
    async def intake(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        async for event in stream.events():
            msg = event.message
            metrics.RECORDS.labels(topic=msg.topic).inc()
            last_read[msg.tp] = msg.offset
            kind: TopicKind = "messages" if msg.topic == settings.topic_messages else "decisions"
            record = SourceRecord(kind, msg.topic, msg.partition, msg.offset, msg.key, msg.value)
            item, out = decode(record, policy, time.time())
            if item is None:
                await send_all(out)
                continue
            metrics.count(out.counts)
            key = item.session_id.encode()
            # The record's own timestamp travels on, for the turn latency histogram.
            await sessions.send(
                key=key,
                value=dump_input(item),
                timestamp=msg.timestamp,
                partition=partition_for(key, partitions),
            )
            yield None

    @app.agent(sessions)
    async def assemble(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        async for event in stream.events():
            if event.message.value == SWEEP:
                await sweep(event.message.partition)
                continue
            item = load_input(event.message.value)
            state, out = apply(store.get(item.session_id), item, policy, time.time())
            await send_all(out, started=event.message.timestamp)
            store.put(state)
            yield None

    async def sweep(partition: int) -> None:
        now = time.time()
        for session_id in store.session_ids():
            if partition_for(session_id.encode(), partitions) != partition:
                continue
            state = store.get(session_id)
            if state is None:
                continue
            kept, out = expire(state, policy, now)
            await send_all(out)
            if kept is None:
                store.delete(session_id)
            elif out.counts["turns_closed"]:
                store.put(kept)

    @app.timer(settings.sweep_interval_seconds, on_leader=True)
    async def request_sweeps() -> None:
        for partition in range(partitions):
            await sessions.send(key=None, value=SWEEP, partition=partition)

    @app.page("/health")
    async def health(web: Any, request: Any) -> Any:
        """Live while the event loop answers."""
        return web.json({"status": "live"})

    @app.page("/metrics")
    async def metrics_page(web: Any, request: Any) -> Any:
        metrics.SESSIONS.set(len(table))
        for tp in app.consumer.assignment():
            if tp in last_read and (highwater := app.consumer.highwater(tp)) is not None:
                lag = max(0, highwater - last_read[tp] - 1)
                metrics.LAG.labels(topic=tp.topic, partition=str(tp.partition)).set(lag)
        return web.bytes(generate_latest(metrics.REGISTRY), content_type=METRICS_CONTENT_TYPE)

    @app.page("/sessions/{session_id}")
    @app.table_route(table=table, match_info="session_id")
    async def session_state(web: Any, request: Any, session_id: str) -> Any:
        """One session's state, answered by the worker that owns it."""
        state = store.get(session_id)
        if state is None:
            return web.json({"error": f"no state for session {session_id!r}"}, status=404)
        return web.bytes(state.to_json(), content_type="application/json")

    @app.page("/ready")
    async def ready(web: Any, request: Any) -> Any:
        """Ready once table recovery has finished and no rebalance is under way."""
        ok = cast(TableManager, app.tables).recovery.completed.is_set() and not app.rebalancing
        return web.json({"ready": ok}, status=200 if ok else 503)

    # Faust's signal stubs do not describe receivers that take the signal's arguments.
    @app.on_partitions_assigned.connect  # type: ignore[arg-type]
    async def on_assigned(app: faust.App, assigned: set[Any], **kwargs: Any) -> None:
        logs.event(
            "partitions_assigned",
            partitions=sorted(
                f"{tp.topic}:{tp.partition}"
                for tp in assigned
                if tp.topic == sessions.get_topic_name()
            ),
        )

    @app.on_rebalance_complete.connect  # type: ignore[arg-type]
    async def on_recovered(app: faust.App, **kwargs: Any) -> None:
        logs.event("recovery_done", sessions=len(table))

    @app.task
    async def on_startup() -> None:
        # Faust's terminal spinner handler listens at DEBUG, which keeps the root logger at
        # DEBUG: every library debug call then builds a record (~8 % of a busy worker's
        # CPU, measured with py-spy). A service has no spinner to turn.
        root = logging.getLogger()
        root.handlers[:] = [h for h in root.handlers if type(h).__name__ != "SpinnerHandler"]
        levels = [h.level for h in root.handlers if h.level]
        root.setLevel(min(levels) if levels else logging.INFO)
        logs.event(
            "startup",
            app_id=settings.id,
            broker=settings.broker_url,
            org_id=policy.org_id,
            partitions=partitions,
            store=settings.store_url,
            topics=[
                settings.topic_messages,
                settings.topic_decisions,
                settings.topic_turns,
                settings.topic_dlq,
            ],
        )
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop_now, signum)

    @app.task
    async def declare_topics() -> None:
        for t in (turns, dead_letters):
            await t.maybe_declare()

    return app


app = create_app(load_settings())

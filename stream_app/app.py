"""The worker: a Faust app over the pure core (SPEC §1, §5), declared on one page.

One agent, ``assemble``, reads the two input topics and ``<id>-sessions``. An input record
is decoded (or dead-lettered) and re-keyed by session id onto ``<id>-sessions``, so one
worker owns everything of a session; a record already on its session's partition is
applied where it is (``worker.Routing``). A session's state lives in four tables:
``sessions`` (heads), ``entries``, ``turn_bodies`` and ``decisions`` (the collapse), laid
out so that a checkpoint writes what changed (``state/entries.py``); a fifth, ``due``,
files each session at its next instant, when a turn of it goes final or it expires
(``state/due.py``); a checkpoint writes the final records of the turns that closed once it
holds their closing (``worker/final_records.py``); a sixth, ``final_keys``, remembers the
turns that went final beyond their sessions (``state/final_keys.py``).

Each event the agent receives stands for a run of consecutive records of one partition
(``Consumer.delivered``): Faust's per-event path then costs once per run. Records are
applied into batches (``worker.Worker``); a batch's turns, dead letters and re-keyed
records are sent (``worker.Outbox``) and acknowledged, then the sessions it changed are
written, and only then are its events acknowledged to Faust, which commits their offsets
(``checkpointing/batches.py``; Faust's own holes in that bookkeeping are closed in
``checkpointing/consumer.py``). A worker killed anywhere re-reads at most what it had not
finished, and the core recognises a record it has applied.

``faust -A stream_app.app worker`` and ``stream-app worker`` both run this module's ``app``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, cast

import faust
import orjson
from faust.tables.manager import TableManager
from faust.types import TP
from faust.web import Request, Response, View
from mode.supervisors import CrashingSupervisor
from prometheus_client import generate_latest

from stream_app.checkpointing.batches import Checkpoints
from stream_app.checkpointing.consumer import (
    RUN_RECORDS,
    Consumer,
    RunScheduler,
    Transport,
)
from stream_app.config import Settings, load_settings
from stream_app.core import finality
from stream_app.core.inputs import DECISIONS
from stream_app.models.topics import partition_for
from stream_app.observability import logs, metrics
from stream_app.runtime import allocator
from stream_app.runtime.slices import Slices
from stream_app.state.due import DueIndex, OrderedMemoryStore, session_of_due
from stream_app.state.entries import StateFormatNewer
from stream_app.state.final_keys import TableFinalKeys, session_of_final_key
from stream_app.state.recovery import (
    FetchEndTableManager,
    bootstrap_servers,
    client_options,
    partition_counts,
)
from stream_app.state.sessions import TableSessions, session_of
from stream_app.state.tables import KeyPartitionedTable
from stream_app.worker import reachability, web_server
from stream_app.worker.final_records import Finalizer
from stream_app.worker.otlp_receiver import OtlpReceiver
from stream_app.worker.pipeline import Pipeline
from stream_app.worker.web_auth import guard_faust_views, requires_token
from stream_app.worker.worker import TICK, Outbox, Routing, Worker

METRICS_CONTENT_TYPE = "text/plain; version=0.0.4"  # aiohttp adds the charset itself
LAG_PROBE_SECONDS = 0.05


class App(faust.App):
    """Faust's app with the consumer of ``checkpointing/consumer.py``, and the one setting
    of it Faust has no name for: how long a fetch may wait (R12 there)."""

    def __init__(self, *args: Any, fetch_max_wait_ms: int = 500, **kwargs: Any) -> None:
        self.fetch_max_wait_ms = fetch_max_wait_ms
        super().__init__(*args, **kwargs)

    def _new_transport(self) -> Transport:
        return Transport(self.conf.broker_consumer, self)


def create_app(settings: Settings) -> faust.App:
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
        web=web_server.WEB,  # Faust's aiohttp server, within limits (worker/web_server.py)
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
        fetch_max_wait_ms=settings.fetch_max_wait_ms,
    )
    guard_faust_views(app, settings.web_token)

    # -- topics ----------------------------------------------------------------------
    def topic(*names: str, internal: bool = False, compacting: bool | None = None) -> faust.TopicT:
        return app.topic(
            *names,
            key_type=bytes,
            value_type=bytes,
            partitions=partitions,
            internal=internal,
            compacting=compacting,
        )

    routing = Routing(
        sessions_topic=f"{settings.id}-sessions",
        kinds=settings.input_topics(),  # the input kinds (core/inputs.py) by their topics
        partitions=partitions,
        # The agents' telemetry, translated into decisions on the decisions topic (SPEC §10).
        telemetry_topic=settings.topic_telemetry,
        decisions_topic=settings.topic_of(DECISIONS.name),
    )
    records = topic(  # made if missing
        *routing.kinds, settings.topic_telemetry, routing.sessions_topic, internal=True
    )
    sessions = topic(routing.sessions_topic, internal=True)
    turns = topic(settings.topic_turns, compacting=True)
    dead_letters = topic(settings.topic_dlq)
    finals = topic(settings.topic_final, compacting=True)

    # -- tables (state/sessions.py, state/entries.py, state/due.py) ------------------
    def table(
        name: str, session_of: Callable[[bytes], bytes] = bytes, **options: Any
    ) -> KeyPartitionedTable:
        return cast(
            KeyPartitionedTable,
            app.Table(name, partitions=partitions, session_of=session_of, **options),
        )

    heads = table("sessions")
    entries = table("entries", session_of=session_of)
    bodies = table("turn_bodies", session_of=session_of)
    collapse = table("decisions", session_of=session_of)
    due = table("due", session_of=session_of_due, memory_store=OrderedMemoryStore)
    final_keys = table(
        "final_keys", session_of=session_of_final_key, memory_store=OrderedMemoryStore
    )
    # The sessions with their parts composed beside them (state/parts.py).
    store = TableSessions(
        heads,
        collapse,
        bodies,
        entries,
        policy.max_state_record_bytes,
        index=DueIndex(due, policy, finality.Timing(policy), partitions),
        final_keys=TableFinalKeys(final_keys, partitions),
    )
    # Closed turns wait in the state for the checkpoint that holds them (worker/final_records.py).
    pipeline = Pipeline(policy, store, finals_now=False)
    worker = Worker(
        pipeline, store, routing, settings.on_processing_error, settings.waiting_warn_seconds
    )

    # -- the agent -------------------------------------------------------------------
    @app.agent(records)
    async def assemble(stream: faust.StreamT[bytes]) -> None:
        """Applies runs of records into batches, which ``Checkpoints`` sends, writes and
        acknowledges in the background (``checkpointing/batches.py``)."""
        consumer = cast(Consumer, app.consumer)
        outbox = Outbox(
            app.producer, settings.topic_turns, settings.topic_dlq, routing, settings.topic_final
        )
        checkpoints = Checkpoints(
            store,
            [heads, entries, bodies, collapse, due, final_keys],
            consumer,
            outbox.send,
            outbox.observe,
            app.crash,
            interval=settings.commit_interval_ms / 1000,
            after_write=Finalizer(store, outbox.send_finals).after_write,
        )
        give_back = Slices()  # a full buffer is read without ever awaiting (runtime/slices.py)
        try:
            async for event in stream.noack().events():  # type: ignore[attr-defined]
                if worker.refused is not None:  # met at recovery (on_recovered)
                    raise worker.refused
                run = consumer.delivered(event.message)  # a run of one partition
                worker.read(run)
                for message in run:
                    if worker.is_telemetry(message):  # translated a slice at a time
                        await worker.apply_telemetry(message, checkpoints.add, give_back)
                    else:
                        worker.apply(message, checkpoints.add(message))
                await checkpoints.added(full=settings.batch_max_records)
                allocator.freeze_survivors()  # what a step leaves alive: walk it no more
                await give_back()
        except StateFormatNewer as exc:  # a rollback onto newer state: hold, delete nothing
            checkpoints.fail(exc)  # nothing of the batch is acknowledged, nor committed
            worker.refuse(exc)
            await asyncio.Event().wait()  # the partitions held until the worker is stopped
        except Exception as exc:  # a stop's cancellation still checkpoints what was applied
            checkpoints.fail(exc)  # the batch the record was in is never acknowledged
            raise

    # -- timers ----------------------------------------------------------------------
    @app.timer(settings.final_tick_seconds, on_leader=True)  # type: ignore[untyped-decorator]
    async def request_ticks() -> None:
        """The one timer: turns go final and idle sessions expire on the worker's clock,
        although their session may never receive another record. The owner of each sessions
        partition reads its due index up to now at each tick, in order with the partition's
        records (``worker.TICK``). Each carries its format (``worker.INTERNAL_FORMAT``): a
        worker of an older release ignores it."""
        for partition in range(partitions):
            await sessions.send(key=None, value=TICK, partition=partition, headers=worker.headers)

    @app.timer(allocator.INTERVAL)  # type: ignore[untyped-decorator]
    async def give_back_memory() -> None:
        """An idle worker also drops what only speeds up work: the decoded states (in the
        tables) and the cached partitions of session keys; and collects the cycles that
        the agent froze (``allocator.freeze_survivors``)."""
        if store.forget_if_idle():
            partition_for.cache_clear()
            allocator.collect_frozen()
        allocator.give_back()

    @app.task  # type: ignore[untyped-decorator]
    async def measure_loop_lag() -> None:
        """Event-loop lag, as a 50 ms sleep overshoots: what a blocked loop costs. Timed by
        the clock, not the loop's: uvloop's ``loop.time()`` counts whole milliseconds."""
        worst = 0.0
        while True:
            started = time.monotonic()
            await asyncio.sleep(LAG_PROBE_SECONDS)
            lag = max(0.0, time.monotonic() - started - LAG_PROBE_SECONDS)
            metrics.LOOP_LAG.observe(lag)
            if lag > worst:
                worst = lag
                metrics.LOOP_LAG_MAX.set(worst)

    watch = reachability.Watch(settings.bootstrap_servers(), settings.kafka_options())

    @app.timer(reachability.WATCH_INTERVAL)  # type: ignore[untyped-decorator]
    async def watch_broker() -> None:
        await watch.check()

    # -- the agents' telemetry in: POST /v1/logs (worker/otlp_receiver.py) -------------
    async def to_telemetry(record: bytes) -> None:
        """The request's record on the telemetry topic, returning once the broker has it."""
        if not watch.reachable:
            raise ConnectionError("no broker answers")
        acknowledged = await app.producer.send(
            settings.topic_telemetry,
            key=None,
            value=record,
            partition=None,
            timestamp=None,
            headers=None,
        )
        await acknowledged

    def observe_request(outcome: str, log_records: int) -> None:
        metrics.OTLP_REQUESTS.labels(outcome=outcome).inc()
        if outcome == "accepted":
            metrics.OTLP_LOG_RECORDS.inc(log_records)

    receiver = OtlpReceiver(
        to_telemetry,
        token=settings.web_token,
        max_body_bytes=settings.max_record_bytes,
        observe=observe_request,
    )
    receiver.add_route(cast(Any, app.web).web_app)  # answers while tables recover

    # -- pages -----------------------------------------------------------------------
    @app.page("/health")
    async def health(web: View, request: Request) -> Response:
        """Live while the event loop answers and the agent runs. Once the app has crashed
        or stops, or the agent has stopped, nothing reads the inputs any more: a worker
        stuck in that stop must look dead to the liveness probe (``should_stop`` is mode's
        public "stopped or crashed")."""
        if app.should_stop or assemble.should_stop:
            return web.json({"status": "stopped"}, status=503)
        return web.json({"status": "live"})

    @app.page("/ready")
    async def ready(web: View, request: Request) -> Response:
        """Ready once table recovery has finished, while no rebalance is under way, the
        cluster answers and no state of a newer release was met (``Worker.refuse``)."""
        recovered = cast(TableManager, app.tables).recovery.completed.is_set()
        refused = worker.refused
        ok = recovered and not app.rebalancing and watch.reachable and refused is None
        body = {"ready": ok, "broker": "reachable" if watch.reachable else "unreachable"}
        if refused is not None:
            body["state"] = str(refused)
        return web.json(body, status=200 if ok else 503)

    @app.page("/metrics")
    async def metrics_page(web: View, request: Request) -> Response:
        metrics.SESSIONS.set(len(store))
        metrics.PARTITIONS_REREADING.set(cast(Consumer, app.consumer).rereading())
        metrics.LAG.clear()
        for tp, lag in routing.lag(app.consumer.assignment(), app.consumer.highwater).items():
            metrics.LAG.labels(topic=tp.topic, partition=str(tp.partition)).set(lag)
        return web.bytes(generate_latest(metrics.REGISTRY), content_type=METRICS_CONTENT_TYPE)

    @app.page("/sessions/{session_id}")
    @requires_token(settings.web_token)  # before the routing: a forwarded request keeps it
    @app.table_route(table=heads, match_info="session_id")
    async def session_state(web: View, request: Request, session_id: str) -> Response:
        """One session's state, answered by the worker that owns it."""
        state, generation, closed = store.peek(session_id)
        if state is None:
            return web.json({"error": f"no state for session {session_id!r}"}, status=404)
        # The state with its closed turns still to be written (state/closed.py), the
        # generation last written (state/written.py), and which turns are final
        # (core/finality.view), beside the state.
        view = {
            **orjson.loads(state.to_json(closed.values())),
            "generation": generation,
            "finality": finality.view(state, closed.values(), policy),
        }
        return web.bytes(orjson.dumps(view), content_type="application/json")

    # -- signals and start-up --------------------------------------------------------
    # Faust's signal stubs do not describe receivers that take the signal's arguments.
    @app.on_partitions_assigned.connect  # type: ignore[arg-type]
    async def on_assigned(app: faust.App, assigned: set[TP], **kwargs: object) -> None:
        routing.assigned(assigned)
        worker.assigned()  # what the last ticks found waiting, of the partitions kept
        store.forget_all()  # partitions may have moved and back: the tables rule
        if not routing.copartitioned:
            # Asked once: which path a record takes must never change for a topic.
            counts = await partition_counts(
                bootstrap_servers(app), list(routing.kinds), client_options(app)
            )
            routing.copartitioned.update({name: n == partitions for name, n in counts.items()})
        logs.event(
            "partitions_assigned",
            partitions=sorted(f"{routing.sessions_topic}:{p}" for p in routing.owned),
            applied_in_place=sorted(n for n, same in routing.copartitioned.items() if same),
        )

    @app.on_rebalance_complete.connect  # type: ignore[arg-type]
    async def on_recovered(app: faust.App, **kwargs: object) -> None:
        """The tables hold the assigned partitions now: their state written by an older
        release is filed in the due index, and state of a newer one stops the worker
        before a record of it is applied (``state/entries.py``, Formats)."""
        try:
            filed = await store.index_held(sorted(routing.owned), time.time())
        except StateFormatNewer as exc:
            worker.refuse(exc)
            filed = 0
        logs.event("recovery_done", sessions=store.recount(), refiled=filed)

    @app.task  # type: ignore[untyped-decorator]
    async def on_startup() -> None:
        logs.quiet_root_logger()
        for t in (turns, dead_letters, finals):
            await t.maybe_declare()
        metrics.declare(list(routing.kinds))
        release = metrics.build_info()  # the package version and commit (stream_app.release)
        logs.event(
            "startup",
            version=release["version"],
            commit=release["commit"],
            app_id=settings.id,
            broker=settings.broker_url,
            loop=type(asyncio.get_running_loop()).__module__.partition(".")[0],
            org_id=policy.org_id,
            partitions=partitions,
            store=settings.store,
            topics=[*routing.kinds, settings.topic_turns, settings.topic_dlq, settings.topic_final],
        )

    return app


app = create_app(load_settings())

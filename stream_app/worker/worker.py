"""The work behind ``app.py``'s agent: records into the core, what it emits out to Kafka.

One record's walk, in one direction: ``Worker.apply`` decodes it (``Pipeline.decode``) and
either applies it to its session in place or forwards it, re-keyed by session, to
``<id>-sessions``; what the core emits waits in the record's batch
(``checkpointing/batches.py``), which ``Outbox.send`` hands to the producer and
``Outbox.observe`` counts and logs once the broker has it. A record has one ``Outputs``
from its decode on (applied in place, the apply fills the decode's; forwarded, what the
decode counted waits in the batch beside it), so ``observe`` is the one place a count of
the worker becomes a metric: none is counted for a batch the broker never took.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, cast

import orjson
from faust.types import TP, Message, ProducerT, RecordMetadata

from stream_app.broker.record_batches import RecordBatches, aiokafka_producer
from stream_app.checkpointing.batches import Batch, Emitted, Forward
from stream_app.core.counts import Count, Counts
from stream_app.core.dead_letter import original_key, rejected
from stream_app.core.records import (
    FinalTurn,
    Origin,
    Outputs,
    SessionInput,
    SourceRecord,
    TopicKind,
    dump_input,
    load_input,
)
from stream_app.core.waiting import HINTS, WaitingSweep
from stream_app.ingest import telemetry
from stream_app.models.dead_letter import Reason
from stream_app.models.topics import partition_for
from stream_app.observability import logs, metrics
from stream_app.runtime.slices import Slices
from stream_app.state.entries import STATE_FORMAT, StateFormatNewer
from stream_app.state.sessions import TableSessions
from stream_app.worker.pipeline import Pipeline

# What workers write to <id>-sessions for each other (the leader's SWEEP and TICK, inputs
# forwarded to their session's owner: ``records.dump_input``) is in a format, named by the
# header FORMAT_HEADER of each record; a record without it is in format 1 (as written
# before the header, by release 31bff95: the same bytes). A worker applies the formats up to
# its own INTERNAL_FORMAT and ignores, with a count, a record of a newer one (a newer
# release's, during a rolling update or after a rollback), never dead-letters it. A change
# to any of these records' bytes is a new format, written only by the release after one that
# reads it (docs/operations.md, rolling updates).
INTERNAL_FORMAT = 1
FORMAT_HEADER = "v"
# On every record written (a list: aiokafka's record batches take no other sequence).
FORMAT_HEADERS = [(FORMAT_HEADER, str(INTERNAL_FORMAT).encode())]
# The timer record of the leaders of releases before issue 50 (a minute sweep of every
# head), still read from them during a rolling update: ignored, as the tick now expires
# idle sessions too (``state/due.py``). No release writes it any more.
SWEEP = b'{"sweep":true}'
# The leader's record on each sessions partition every STREAM_APP_FINAL_TICK_SECONDS: its
# owner closes the turns due by its clock, in order with the partition's records (the
# due index, ``state/due.py``, names them).
TICK = b'{"tick":true}'
TICK_SESSIONS = 20  # sessions a tick reads at most (about a run of records' time)
TELEMETRY = "telemetry"  # a telemetry record's kind: no input kind, it makes decisions
IGNORED_EVENT_NAMES = 100  # event labels of stream_app_telemetry_ignored; later: "other"


@dataclass
class Routing:
    """Where a decoded input is applied: in place when its session's partition of
    ``<id>-sessions`` is the one it was read from and this worker owns it, else forwarded.

    The in-place path depends only on the two partitions, so it keeps each input
    partition's order; it is decided once per input topic (``copartitioned``), since a
    record forwarded and not yet applied would otherwise come after later records of its
    partition applied in place, and the core would take it for one it had applied."""

    sessions_topic: str
    kinds: dict[str, TopicKind]  # input topic -> the name of its kind (core/inputs.py)
    partitions: int
    owned: set[int] = field(default_factory=set)  # this generation's sessions partitions
    copartitioned: dict[str, bool] = field(default_factory=dict)
    last_read: dict[TP, int] = field(default_factory=dict)  # for the lag gauge
    # The agents' telemetry (SPEC §10): its topic, and the decisions topic its translated
    # decisions go to, keyed by session ("" when the app reads no telemetry).
    telemetry_topic: str = ""
    decisions_topic: str = ""

    def assigned(self, partitions: Iterable[TP]) -> None:
        self.owned = {tp.partition for tp in partitions if tp.topic == self.sessions_topic}

    def in_place(self, topic: str, read_from: int, partition: int) -> bool:
        return (
            partition == read_from
            and partition in self.owned
            and self.copartitioned.get(topic, False)
        )

    def lag(self, assigned: set[TP], highwater: Callable[[TP], int | None]) -> dict[TP, int]:
        """Records not yet read per assigned input partition (``highwater(tp)``: the
        consumer's high watermark); a partition moved away is forgotten here."""
        for tp in [tp for tp in self.last_read if tp not in assigned]:
            del self.last_read[tp]
        return {
            tp: max(0, end - self.last_read[tp] - 1)
            for tp in assigned
            if tp in self.last_read and (end := highwater(tp)) is not None
        }


class Worker:
    """Applies each delivered record to the core, into its batch.

    A record whose processing raises is, by default, a ``processing_error`` dead letter
    naming the exception, and the worker goes on (Kafka Streams' processing exception
    handler, KIP-1033); with ``STREAM_APP_ON_PROCESSING_ERROR=stop`` it stops the worker.
    Either way nothing of the batch it was in is checkpointed before the failure: a
    stopped worker reads it again. The core changes a session in place, so a step that
    raised part-way leaves the session as it left it."""

    headers = FORMAT_HEADERS  # what each record written to <id>-sessions carries

    def __init__(
        self,
        pipeline: Pipeline,
        store: TableSessions,
        routing: Routing,
        on_processing_error: Literal["dead_letter", "stop"] = "dead_letter",
        waiting_warn_seconds: float = 300.0,
    ) -> None:
        self.pipeline = pipeline
        self.store = store
        self.routing = routing
        self.on_processing_error = on_processing_error
        self.waiting_warn_seconds = waiting_warn_seconds
        self._records_read = {name: metrics.RECORDS.labels(topic=name) for name in routing.kinds}
        if routing.telemetry_topic:
            telemetry_read = metrics.RECORDS.labels(topic=routing.telemetry_topic)
            self._records_read[routing.telemetry_topic] = telemetry_read
        # By sessions partition, as its last tick found them: turns waiting to go final.
        self.finals_waiting: dict[int, int] = {}
        # By sessions partition, as its last tick's report found them: what waits past the
        # threshold (``core/waiting.py``), and when that was (where the next report's
        # crossings begin); a partition assigned anew has neither.
        self.waited: dict[int, WaitingSweep] = {}
        self.newer_formats: set[int] = set()  # of <id>-sessions' records, met and logged
        self.refused: StateFormatNewer | None = None  # the newer state met (``refuse``)

    def assigned(self) -> None:
        """Forgets what the ticks of the sessions partitions this worker no longer owns found
        (after ``Routing.assigned``): their figures leave the gauges, and the first report
        of one assigned again names every session waiting past the threshold."""
        owned = self.routing.owned
        self.store.forget_waits(owned)
        for partition in [p for p in self.waited if p not in owned]:
            del self.waited[partition]
        for partition in [p for p in self.finals_waiting if p not in owned]:
            del self.finals_waiting[partition]
        self._set_waiting_gauges()

    def read(self, run: list[Message]) -> None:
        """Counts a run of records read (one partition's) for ``/metrics`` and the lag
        gauge: once a run, not once a record."""
        last = run[-1]
        if (counter := self._records_read.get(last.topic)) is not None:
            counter.inc(len(run))
            self.routing.last_read[last.tp] = last.offset

    def apply(self, msg: Message, batch: Batch) -> None:
        """One record into the core; what it emits waits in its batch. State of a newer
        format is never a processing error of the record: the worker stops (``refuse``)."""
        try:
            self._apply(msg, batch)
        except StateFormatNewer:
            raise
        except Exception as exc:
            if self.on_processing_error == "stop":
                raise
            batch.emitted.append(Emitted(_processing_error(msg, exc), None))

    def refuse(self, exc: StateFormatNewer) -> None:
        """Stored state of a newer release: nothing more is applied or committed, ``/ready``
        answers 503 and the gauge says why, once. The state is left exactly as it is, so
        the release that wrote it, rolled forward, goes on with nothing lost."""
        if self.refused is not None:
            return
        self.refused = exc
        metrics.STATE_FORMAT_NEWER.set(1)
        logs.event(
            "state_format_newer",
            logging.CRITICAL,
            table=exc.table,
            format=exc.found,
            known_format=STATE_FORMAT,
            key=exc.key[:200].decode(errors="replace"),
            hint="this release cannot read state a newer release wrote: roll forward to it",
        )

    def _apply(self, msg: Message, batch: Batch) -> None:
        if msg.topic == self.routing.sessions_topic:
            self._apply_forwarded(msg, batch)
            return
        if msg.topic == self.routing.telemetry_topic:
            self._apply_telemetry(msg, batch)
            return
        routing = self.routing
        kind = routing.kinds[msg.topic]
        record = SourceRecord(
            kind, msg.topic, msg.partition, msg.offset, msg.key, msg.value, msg.timestamp
        )
        item, out = self.pipeline.decode(record)
        if item is None:
            batch.emitted.append(Emitted(out, None))
            return
        key = item.session_id.encode()
        partition = partition_for(key, routing.partitions)
        if routing.in_place(msg.topic, msg.partition, partition):
            batch.emitted.append(Emitted(self.pipeline.apply(item, out), msg.timestamp))
            return
        if out.counts:  # what decoding counted: counted with the batch, like everything else
            batch.emitted.append(Emitted(out, None))
        batch.forward.append(Forward(key, dump_input(item), partition, msg.timestamp))

    def is_telemetry(self, msg: Message) -> bool:
        """Whether ``msg`` is a telemetry record (``apply_telemetry`` takes it)."""
        return bool(self.routing.telemetry_topic) and msg.topic == self.routing.telemetry_topic

    async def apply_telemetry(
        self, msg: Message, add: Callable[[Message], Batch], pause: Callable[[], Awaitable[None]]
    ) -> None:
        """A telemetry record, translated a log record at a time with ``pause()`` (the
        agent's ``Slices``) between two, so that a record of thousands of log records does
        not hold the event loop (``runtime/slices.py``); then into the batch ``add(msg)``
        opens for it, once translated: a checkpoint may seal the open batch while this
        waits, and a batch takes nothing once sealed. A large value is decoded in a thread
        (``telemetry.decodes_in_thread``: 1 MiB of OTLP JSON is some 0.25 s of decoding),
        awaited like a pause: the agent awaits this record before it takes the next, so the
        order of records and of batches is the same."""
        policy, now = self.pipeline.policy, self.pipeline.clock()
        record = self._telemetry_record(msg)
        try:
            request = None
            if telemetry.decodes_in_thread(record.value):
                request = await asyncio.to_thread(telemetry.decoded, record, now)
            work = telemetry.stepping(record, policy, now, request)
            while True:
                try:
                    next(work)
                except StopIteration as end:
                    done: telemetry.Step = end.value
                    break
                await pause()
        except Exception as exc:  # as ``apply``: the step never raises, a bug might
            if self.on_processing_error == "stop":
                raise
            add(msg).emitted.append(Emitted(_processing_error(msg, exc), None))
            return
        self._telemetry_into(msg, done, add(msg))

    def _apply_telemetry(self, msg: Message, batch: Batch) -> None:
        """A telemetry record in one step (``apply_telemetry`` is the agent's way)."""
        policy, now = self.pipeline.policy, self.pipeline.clock()
        self._telemetry_into(msg, telemetry.step(self._telemetry_record(msg), policy, now), batch)

    def _telemetry_record(self, msg: Message) -> SourceRecord:
        return SourceRecord(
            TELEMETRY, msg.topic, msg.partition, msg.offset, msg.key, msg.value, msg.timestamp
        )

    def _telemetry_into(self, msg: Message, done: telemetry.Step, batch: Batch) -> None:
        """A telemetry record's step (``ingest/telemetry.py``) into ``batch``: each decision
        it makes goes to the decisions topic keyed by its session (on the broker before the
        record's event is acknowledged: nothing lost in a crash, a copy read again collapses
        by its ``decision_id``); each log record it could not translate, and a record that is
        no request, is a dead letter. Its log records are counted with the batch, once the
        broker has it (``Outbox.observe``), as every other count."""
        routing = self.routing
        for decision in done.translation.decisions:
            key = decision.session_id.encode()
            partition = partition_for(key, routing.partitions)
            forward = Forward(
                key, decision.value, partition, msg.timestamp, routing.decisions_topic
            )
            batch.forward.append(forward)
        batch.emitted.append(Emitted(TelemetryOutputs.of(done), None))

    def _apply_forwarded(self, msg: Message, batch: Batch) -> None:
        value = msg.value
        if value is None:
            return  # nothing this app writes
        written_in = internal_format(msg.headers)
        if written_in != INTERNAL_FORMAT:
            if written_in is None:
                problem = f"its {FORMAT_HEADER!r} header is not a format this app writes"
                batch.emitted.append(Emitted(_rejected(msg, problem), None))
            else:  # a newer release's: it is that release's to apply
                batch.emitted.append(Emitted(_ignored(Count.INTERNAL_NEWER), None))
                self._newer(written_in)
            return
        if value == TICK:
            # A tick reads TICK_SESSIONS sessions at most, so that it holds the event loop no
            # longer than a run of records; one that leaves some sends its partition another
            # tick, which comes back in order with the partition's records.
            pipeline, partition = self.pipeline, msg.partition
            batch.emitted.append(Emitted(pipeline.tick(partition, TICK_SESSIONS), None))
            if pipeline.more_reached:
                batch.forward.append(Forward(b"", TICK, partition, time.time()))
            self.finals_waiting[partition] = pipeline.waiting
            self._report_waiting(partition, pipeline.clock())
            return
        if value == SWEEP:
            return  # a leader of a release before issue 50: the index holds expiries now
        item = _forwarded(value)
        if item is not None:
            batch.emitted.append(Emitted(self.pipeline.apply(item), msg.timestamp))
        else:
            batch.emitted.append(Emitted(_rejected(msg, "not a record this app writes"), None))

    def _newer(self, written_in: int) -> None:
        """One line the first time a format newer than this worker's is met (the count
        follows every record: ``stream_app_internal_records_ignored_total``)."""
        if written_in in self.newer_formats:
            return
        self.newer_formats.add(written_in)
        logs.event(
            "internal_format_newer",
            format=written_in,
            known_format=INTERNAL_FORMAT,
            hint="a newer release writes to the sessions topic (a rolling update, or a "
            "rollback under way): its records are ignored and counted until it is gone or "
            "this worker is replaced",
        )

    def _report_waiting(self, partition: int, now: float) -> None:
        """What waits in the partition past the threshold, from what its heads say waits
        (``TableSessions.waits_in``: the sessions with something waiting, never every head)."""
        last = self.waited.get(partition)
        sweep = WaitingSweep(self.waiting_warn_seconds, now, None if last is None else last.now)
        waits = self.store.waits_in(partition)
        for session_id in sorted(waits):  # named in the order of their ids, as heads sort
            sweep.see_waits(session_id, *waits[session_id])
        self._waited(partition, sweep)

    def _waited(self, partition: int, sweep: WaitingSweep) -> None:
        """Keeps what a report found waiting, sets the gauges, and logs the sessions that
        crossed the threshold since the partition's previous report (once each; past
        ``waiting.NAMED`` of them, one line counts the rest)."""
        crossed, sweep.crossed = sweep.crossed, []  # kept: the figures, not the names
        for crossing in crossed:
            logs.event(
                "waiting_too_long",
                logging.WARNING,
                session_id=crossing.session_id,
                kind=crossing.kind,
                waiting=crossing.waiting,
                age_seconds=round(crossing.age, 1),
                threshold_seconds=sweep.threshold,
                hint=HINTS[crossing.kind],
            )
        if sweep.unnamed:
            logs.event(
                "waiting_too_long_more",
                logging.WARNING,
                sessions=sweep.unnamed,
                partition=partition,
                hint="sessions that crossed the threshold since the last report, not named one "
                "by one",
            )
        self.waited[partition] = sweep
        self._set_waiting_gauges()

    def _set_waiting_gauges(self) -> None:
        """The gauges of what waits, from every owned partition's last tick."""
        metrics.FINAL_WAITING.set(sum(self.finals_waiting.values()))
        metrics.FINAL_KEYS.set(self.store.final_keys.held())
        found = self.waited.values()
        metrics.MESSAGES_WAITING.set(sum(s.messages.sessions for s in found))
        metrics.MESSAGES_WAITING_OLDEST.set(max((s.messages.oldest for s in found), default=0))
        metrics.DECISIONS_WAITING.set(sum(s.decisions.sessions for s in found))
        metrics.DECISIONS_WAITING_OLDEST.set(max((s.decisions.oldest for s in found), default=0))


@dataclass(slots=True)
class TelemetryOutputs(Outputs):
    """A telemetry record's outputs (its dead letters) with its translation's counts, which
    ``Outbox.observe`` moves the metrics by once the broker has the batch: a record read
    again after a failed batch is counted once, like every other count."""

    translation: telemetry.Translation | None = None

    @classmethod
    def of(cls, done: telemetry.Step) -> TelemetryOutputs:
        out = cls(translation=done.translation)
        out.extend(done.out)
        return out


_ignored_events: set[str] = set()  # the event labels of TELEMETRY_IGNORED, this process's


def count_telemetry(translation: telemetry.Translation) -> None:
    """Moves the telemetry metrics by a record's translation (past IGNORED_EVENT_NAMES event
    names, an ignored one is counted as ``other``)."""
    for harness, n in translation.translated.items():
        metrics.TELEMETRY_TRANSLATED.labels(harness=harness).inc(n)
    for event, n in translation.ignored.items():
        if event not in _ignored_events:
            event = "other" if len(_ignored_events) >= IGNORED_EVENT_NAMES else event
            _ignored_events.add(event)
        metrics.TELEMETRY_IGNORED.labels(event=event).inc(n)
    for event, n in translation.untranslatable.items():
        metrics.TELEMETRY_UNTRANSLATABLE.labels(event=event).inc(n)


def internal_format(headers: object) -> int | None:
    """The format a record of ``<id>-sessions`` is in, by its headers (a sequence of
    ``(name, bytes)`` pairs, or a mapping): 1 without a FORMAT_HEADER (release 31bff95
    wrote none), None when that header is no format number."""
    if not headers:
        return 1
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    for name, given in cast(Iterable[tuple[str, bytes]], pairs):
        if name != FORMAT_HEADER:
            continue
        try:
            number = int(given)
        except (TypeError, ValueError):
            return None
        return number if number > 0 else None
    return 1


def _ignored(count: Count) -> Outputs:
    """A record left to the release that wrote it, counted (``observe`` counts it)."""
    out = Outputs()
    out.counts[count] += 1
    return out


def _forwarded(value: bytes) -> SessionInput | None:
    """A record of ``<id>-sessions`` as the intake wrote it; None for anything else (the
    topic is internal, but any client can write to it)."""
    try:
        return load_input(value)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


def _origin(msg: Message) -> Origin:
    """The record a dead letter of the worker's own carries (any kind: only its bytes go)."""
    return Origin.of(msg)


def _processing_error(msg: Message, exc: Exception) -> Outputs:
    error = f"processing raised {type(exc).__name__}: {exc}"
    logs.event(
        "processing_error",
        logging.ERROR,
        topic=msg.topic,
        partition=msg.partition,
        offset=msg.offset,
        error=error[:500],
    )
    return rejected(_origin(msg), Reason.PROCESSING_ERROR, error, time.time())


def _rejected(msg: Message, problem: str) -> Outputs:
    return rejected(_origin(msg), Reason.SCHEMA, f"(record): {problem}", time.time())


class Outbox:
    """Ships a batch's emissions and forwarded inputs, and counts them once they are in.

    Turn revisions and forwarded inputs go in record batches
    (``broker/record_batches.py``), one acknowledgement a batch; dead letters, few and
    keyed by whatever the producer sent, one at a time through Faust's producer, which
    picks their partition."""

    def __init__(
        self,
        producer: ProducerT,
        turns_topic: str,
        dlq_topic: str,
        routing: Routing,
        final_topic: str | None = None,
    ) -> None:
        self.producer = producer
        self.turns_topic = turns_topic
        self.dlq_topic = dlq_topic
        self.final_topic = final_topic
        self.routing = routing
        self._batches = RecordBatches(lambda: aiokafka_producer(producer))
        self._finals = RecordBatches(lambda: aiokafka_producer(producer))

    async def send_finals(self, finals: list[FinalTurn]) -> None:
        """Hands final records to the producer, each to its session's partition of the final
        topic, and returns once the broker has them all (``worker/final_records.py``)."""
        assert self.final_topic is not None
        partitions, pause = self.routing.partitions, Slices()
        for final in finals:
            await pause()
            partition = partition_for(final.session_id.encode(), partitions)
            await self._finals.append(
                TP(self.final_topic, partition),
                final.key_bytes,
                final.value,
                headers=final.headers,
            )
        for delivery in await self._finals.hand_over_all():
            await delivery.acknowledged

    async def send(self, batch: Batch) -> list[Awaitable[RecordMetadata]]:
        """Hands a batch's emissions and forwarded inputs to the producer, in order."""
        producer, partitions, batches = self.producer, self.routing.partitions, self._batches
        acks: list[Awaitable[RecordMetadata]] = []
        pause = Slices()
        for out, _ in batch.emitted:
            await pause()
            for revision in out.turns:
                partition = partition_for(revision.session_id.encode(), partitions)
                await batches.append(
                    TP(self.turns_topic, partition),
                    revision.key_bytes,
                    revision.value,
                    headers=revision.headers,
                )
            for letter in out.dead_letters:
                acks.append(
                    await producer.send(
                        self.dlq_topic,
                        key=original_key(letter),
                        value=orjson.dumps(letter),
                        partition=None,
                        timestamp=None,
                        headers=None,
                    )
                )
        sessions = self.routing.sessions_topic
        for forward in batch.forward:
            await pause()
            await batches.append(
                TP(forward.topic or sessions, forward.partition),
                forward.key,
                forward.value,
                timestamp_ms=int(forward.timestamp * 1000),
                # A decision translated from telemetry is a decisions topic's record as any
                # producer's: no format header.
                headers=FORMAT_HEADERS if forward.topic is None else [],
            )
        acks += [delivery.acknowledged for delivery in await batches.hand_over_all()]
        return acks

    def observe(self, batch: Batch) -> None:
        """Counts and logs what a batch emitted, now that the broker has it (each metric
        moved once a batch: a labelled series costs a look-up and a lock)."""
        now = time.time()
        counts = Counts()
        for out, started in batch.emitted:
            for name, n in out.counts.items():
                counts[name] += n
            if isinstance(out, TelemetryOutputs) and out.translation is not None:
                count_telemetry(out.translation)
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
        metrics.count(counts)

"""``stream-app publish``: replay-format lines onto the input topics, as the worker wants them.

A producer that keys a record by anything but its session id, or partitions it with another
hash than Kafka's Java client, sends it on a detour: the worker re-keys it through its
sessions topic, and records of one session on several partitions lose their order. And a
record that breaks the contract is found only later, as a dead letter. So each line is:

1. read as ``stream-app replay`` reads it (``ingest/lines.source_record``);
2. checked by the worker's own intake (``core/intake.py``: size, JSON, schema, limits,
   tenant), so a record refused here is exactly one the worker would dead-letter at intake;
3. sent, with its original bytes, to its kind's topic (``core/inputs.py``), keyed by its
   session id (``conversationId`` of a message, ``session_id`` of a decision, whatever the
   line's key says) on the partition Kafka's default partitioner gives that key (murmur2,
   ``models/topics.partition_for``, the function the worker places sessions with).

A line that fails is reported (line number, field, reason) and skipped, or with ``strict``
the whole file is refused before anything is sent. Within a partition records go in file
order (aiokafka sends one batch per partition at a time), so one session's records arrive in
the order of the file.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from aiokafka.structs import RecordMetadata

from stream_app.broker.clients import client_options, no_broker
from stream_app.config import Settings
from stream_app.console.wording import counted
from stream_app.core.fields import near_misses
from stream_app.core.inputs import INPUTS, MESSAGES
from stream_app.core.intake import decode
from stream_app.core.records import SessionMessage, TopicKind
from stream_app.ingest import otlp
from stream_app.ingest.lines import TELEMETRY, source_record, telemetry_line
from stream_app.models.topics import partition_for

CONNECT_TIMEOUT = 30.0  # seconds for the producer to reach the cluster
IN_FLIGHT = 2000  # records sent but not yet acknowledged before publish waits for them
PROGRESS_EVERY = 1000  # lines between progress reports


class PublishError(Exception):
    """Why publishing stopped, in one line."""


@dataclass(frozen=True, slots=True)
class Rejected:
    """A line the worker would dead-letter at intake; ``reason`` is the dead letter's."""

    line: int  # 1-based, as an editor counts
    reason: str
    error: str  # names the field


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A checked record, ready to send: its session id is the key."""

    line: int
    kind: TopicKind
    topic: str
    key: bytes
    value: bytes
    closes: bool = False  # an assistant message with a finishReason: it makes a turn
    warnings: tuple[str, ...] = ()  # fields that are near misses of the contract's


def check(
    lines: Iterable[bytes], settings: Settings, clock: Callable[[], float] = time.time
) -> Iterator[Outgoing | Rejected]:
    """Each non-blank line as a record to send or the reason the worker would refuse it."""
    policy = settings.policy()
    for offset, line in enumerate(lines):
        if not line.strip():
            continue
        if (exported := telemetry_line(line, offset, settings)) is not None:
            # The agents' telemetry (SPEC §10), as replay takes it: to the telemetry topic,
            # unkeyed as the Collector writes it; a value that is no request is refused here.
            assert exported.value is not None
            try:
                otlp.decode(exported.value)
            except otlp.InvalidOtlp as exc:
                yield Rejected(offset + 1, "invalid_otlp", str(exc))
                continue
            yield Outgoing(offset + 1, TELEMETRY, exported.topic, b"", exported.value)
            continue
        record = source_record(line, offset, settings)
        if isinstance(record, str):
            reason = "invalid_json" if record.startswith("line is not") else "schema"
            yield Rejected(offset + 1, reason, record)
            continue
        item, out = decode(record, policy, clock())
        if item is None:
            letter = out.dead_letters[0]
            yield Rejected(offset + 1, str(letter["reason"]), str(letter["error"]))
            continue
        assert record.value is not None  # a replay line always has a value
        message = item if isinstance(item, SessionMessage) else None
        yield Outgoing(
            offset + 1,
            record.kind,
            record.topic,
            item.session_id.encode(),
            record.value,
            closes=message is not None and message.inference_call_id is not None,
            warnings=tuple(near_misses(orjson.loads(record.value))) if message else (),
        )


class Publisher:
    """An aiokafka producer that puts checked records on their session's partition.

    ``send`` returns once the record is handed to the producer; acknowledgements are awaited
    in windows of ``IN_FLIGHT`` and by ``flush``, and a refused record raises
    :class:`PublishError` there.
    """

    def __init__(self, settings: Settings, bootstrap: str | None = None) -> None:
        self.options = client_options(settings, bootstrap)
        self.where = self.options["bootstrap_servers"]
        self.producer = AIOKafkaProducer(
            **self.options,
            acks="all",
            linger_ms=5,
            compression_type=None if settings.compression == "none" else settings.compression,
            # The largest record intake accepts, with room for the batch around it.
            max_request_size=max(1048576, settings.max_record_bytes + 65536),
        )
        self.partitions: dict[str, int] = {}
        self.unacknowledged: list[tuple[str, Awaitable[RecordMetadata]]] = []

    async def start(self) -> None:
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                await self.producer.start()
        except (KafkaError, OSError, TimeoutError):
            await self.stop()
            raise PublishError(no_broker(self.where)) from None

    async def stop(self) -> None:
        # Going away anyway; a record not acknowledged has been reported by ``flush``.
        with contextlib.suppress(KafkaError, OSError):
            await self.producer.stop()

    async def _partition_count(self, topic: str) -> int:
        """The topic's partition count, from fresh metadata the first time it is asked.

        Asking the producer for a topic's partitions could create the topic with the
        broker's default count; a missing topic is an error instead (the worker creates its
        topics with ``STREAM_APP_PARTITIONS`` partitions).
        """
        if topic not in self.partitions:
            try:
                cluster = await self.producer.client.fetch_all_metadata()
            except KafkaError as exc:
                raise PublishError(f"{self.where}: {exc}") from None
            found = cluster.partitions_for_topic(topic)
            if not found:
                raise PublishError(
                    f"topic {topic!r} does not exist on {self.where}: start a worker (it "
                    f"creates its topics) or create it with STREAM_APP_PARTITIONS partitions"
                )
            self.partitions[topic] = len(found)
        return self.partitions[topic]

    async def send(self, record: Outgoing) -> None:
        partition = partition_for(record.key, await self._partition_count(record.topic))
        try:
            sent = await self.producer.send(
                record.topic, record.value, key=record.key, partition=partition
            )
        except KafkaError as exc:
            raise PublishError(f"{record.topic}: line {record.line}: {exc}") from None
        self.unacknowledged.append((record.topic, sent))
        if len(self.unacknowledged) >= IN_FLIGHT:
            await self.flush()

    async def flush(self) -> None:
        pending, self.unacknowledged = self.unacknowledged, []
        for topic, sent in pending:
            try:
                await sent
            except KafkaError as exc:
                raise PublishError(f"{topic}: the broker refused a record: {exc}") from None


@dataclass(slots=True)
class Published:
    sent: Counter[str] = field(default_factory=Counter)  # by kind's name
    rejected: list[Rejected] = field(default_factory=list)
    refused: bool = False  # strict, and a line was rejected: nothing was sent
    # Per session sent, whether its last message closes a turn: those that do not wait.
    closed: dict[str, bool] = field(default_factory=dict)

    @property
    def unclosed(self) -> list[str]:
        """Sessions whose last messages no finishing message closes."""
        return sorted(session for session, closed in self.closed.items() if not closed)

    @property
    def nothing_sent(self) -> bool:
        """Not a record went out: a failure, though no line stopped the file."""
        return not self.sent.total()


def _lines(path: Path, progress: Callable[[int], None] | None) -> Iterator[bytes]:
    done = 0
    with path.open("rb") as source:
        for n, line in enumerate(source, 1):
            done += len(line)
            if progress is not None and n % PROGRESS_EVERY == 0:
                progress(done)
            yield line
    if progress is not None:
        progress(done)


async def publish(
    path: Path,
    settings: Settings,
    *,
    bootstrap: str | None = None,
    strict: bool = False,
    on_rejected: Callable[[Rejected], None] = lambda r: None,
    on_warning: Callable[[int, str], None] = lambda line, warning: None,
    progress: Callable[[int], None] | None = None,
) -> Published:
    """Publishes a replay-format file; ``progress`` is told the bytes read so far.

    Every rejected line is passed to ``on_rejected`` as it is found. With ``strict`` the
    file is checked whole first, and nothing is sent if a line fails. The broker is first
    contacted for the first record to send. Raises :class:`PublishError` when the broker
    cannot be reached, a topic is missing or a record is refused, and ``OSError`` when the
    file cannot be read.
    """
    result = Published()
    if strict:
        for checked in check(_lines(path, None), settings):
            if isinstance(checked, Rejected):
                result.rejected.append(checked)
                on_rejected(checked)
        if result.rejected:
            result.refused = True
            return result
    # Started at the first record to send: a file with nothing to send needs no broker.
    publisher: Publisher | None = None
    try:
        for checked in check(_lines(path, progress), settings):
            if isinstance(checked, Rejected):
                result.rejected.append(checked)
                on_rejected(checked)
                continue
            if publisher is None:
                publisher = Publisher(settings, bootstrap)
                await publisher.start()
            await publisher.send(checked)
            result.sent[checked.kind] += 1
            for warning in checked.warnings:
                on_warning(checked.line, warning)
            if checked.kind == MESSAGES.name:  # whether a session's last message closes
                result.closed[checked.key.decode()] = checked.closes
        if publisher is not None:
            await publisher.flush()
    finally:
        if publisher is not None:
            await publisher.stop()
    return result


def summary(result: Published) -> str:
    """The line that ends a publish; for a file that sent nothing it says why."""
    rejected = len(result.rejected)
    if result.refused:
        would = "would be a dead letter" if rejected == 1 else "would be dead letters"
        return (
            f"stream-app publish: refused: {counted(rejected, 'line')} {would}; "
            f"nothing sent (--strict)"
        )
    reasons = Counter(r.reason for r in result.rejected)
    by_reason = ", ".join(f"{k} {v}" for k, v in sorted(reasons.items()))
    if result.nothing_sent:
        if not rejected:
            return "stream-app publish: nothing sent: the file holds no records"
        return (
            f"stream-app publish: nothing sent: every line was rejected "
            f"({counted(rejected, 'line')}: {by_reason})"
        )
    skipped = f"{counted(rejected, 'line')} skipped" + (f" ({by_reason})" if reasons else "")
    sent = result.sent
    telemetry = f", {counted(sent[TELEMETRY], 'telemetry record')}" if sent[TELEMETRY] else ""
    return (
        f"stream-app publish: {counted(sent.total(), 'record')} sent "
        f"({', '.join(counted(sent[kind.name], kind.noun) for kind in INPUTS.values())}"
        f"{telemetry}); {skipped}"
    )

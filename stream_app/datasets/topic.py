"""``stream-app export``: the latest revision of every turn, as JSON lines, for dataset builders.

By default export reads the final topic (SPEC §8): each turn once, when nothing can revise it
any more, so every record read is written (a key read twice, the same record written again
after a worker's crash, is written once). With ``include_open`` it reads the turn topic
instead, which holds every revision of a turn under the turn's key (compaction keeps the
latest eventually, or never on the test broker), and writes the latest revision of each key
(``core/revisions.py``), final or not. Either way each is written as ``{"key", "value"}``,
the form of ``stream-app replay``'s TURNS lines.

The end is the high watermark of the first fetch response of each partition, taken after the
export began: ListOffsets "latest" can answer short of the end (``shared/BROKER-NOTES.md``).
Records produced after that are left for the next export.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from typing import IO

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord

from stream_app.broker.clients import ClientOptions, client_options, close_consumer, no_broker
from stream_app.config import Settings
from stream_app.console.wording import counted
from stream_app.core.records import turns_line
from stream_app.core.revisions import Latest, TurnRecord, read_headers, turn_identity

CONNECT_TIMEOUT = 30.0  # seconds for the consumer to reach the cluster
IDLE_TIMEOUT = 30.0  # seconds without a record or a fetch response before export gives up
FETCH_WAIT_MS = 100  # the test broker holds every fetch this long when it has nothing


class ExportError(Exception):
    """Why export cannot finish, in one line."""


async def read_to_end(
    options: ClientOptions,
    topic: str,
    each: Callable[[ConsumerRecord[bytes, bytes]], None],
    progress: Callable[[int, int | None], None] | None = None,
    offsets: dict[int, tuple[int, int]] | None = None,
) -> int:
    """Calls ``each`` with every record of ``topic`` up to its end, partition by partition
    in offset order; returns how many there were.

    ``progress`` is told the offsets covered so far and, once every partition's end is
    known, their total. ``offsets`` is given each partition's (first, end) offsets read.
    Raises :class:`ExportError` when the broker cannot be reached, the
    topic does not exist, or the broker stops answering for ``IDLE_TIMEOUT``.
    """
    consumer = AIOKafkaConsumer(
        **options,
        enable_auto_commit=False,
        fetch_max_wait_ms=FETCH_WAIT_MS,
        max_partition_fetch_bytes=4 * 1048576,
    )
    where = options["bootstrap_servers"]
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT):
            await consumer.start()
    except (KafkaError, OSError, TimeoutError):
        await close_consumer(consumer)
        raise ExportError(no_broker(where)) from None
    try:
        return await _read(consumer, topic, where, each, progress, offsets)
    except KafkaError as exc:
        raise ExportError(f"{where}: {exc}") from None
    finally:
        await close_consumer(consumer)


async def _read(
    consumer: AIOKafkaConsumer,
    topic: str,
    where: str,
    each: Callable[[ConsumerRecord[bytes, bytes]], None],
    progress: Callable[[int, int | None], None] | None,
    offsets: dict[int, tuple[int, int]] | None = None,
) -> int:
    partitions = consumer.partitions_for_topic(topic)
    if not partitions:
        raise ExportError(f"topic {topic!r} does not exist on {where}")
    tps = [TopicPartition(topic, p) for p in sorted(partitions)]
    consumer.assign(tps)
    await consumer.seek_to_beginning(*tps)
    starts = {tp: await consumer.position(tp) for tp in tps}
    positions = dict(starts)
    ends: dict[TopicPartition, int] = {}
    reading = set(tps)
    count = 0
    heard = time.monotonic()
    while reading:
        batch = await consumer.getmany(*reading, timeout_ms=FETCH_WAIT_MS * 2)
        now = time.monotonic()
        for tp in reading - set(ends):
            if (end := consumer.highwater(tp)) is not None:
                ends[tp] = end  # the end as of this fetch: later records are not read
                heard = now
        for tp, records in batch.items():
            heard = now
            for record in records:
                if record.offset < ends[tp]:
                    each(record)
                    count += 1
        for tp in list(reading):
            positions[tp] = await consumer.position(tp)
            if tp in ends and positions[tp] >= ends[tp]:
                reading.discard(tp)
                consumer.pause(tp)
        if progress is not None:
            total = sum(ends[tp] - starts[tp] for tp in tps) if len(ends) == len(tps) else None
            covered = sum(min(positions[tp], ends.get(tp, positions[tp])) for tp in tps)
            progress(covered - sum(starts.values()), total)
        if reading and now - heard > IDLE_TIMEOUT:
            raise ExportError(f"lost the Kafka broker at {where}: no answer for {IDLE_TIMEOUT:g} s")
    if offsets is not None:
        offsets.update({tp.partition: (starts[tp], ends[tp]) for tp in tps})
    return count


async def export(
    settings: Settings,
    out: IO[bytes],
    *,
    bootstrap: str | None = None,
    topic: str | None = None,
    include_open: bool = False,
    clock: Callable[[], float] = time.time,
    progress: Callable[[int, int | None], None] | None = None,
) -> Counter[str]:
    """Writes every final turn to ``out`` as TURNS lines (from the final topic), or with
    ``include_open`` the latest revision of every turn (from the turn topic); returns the
    counts. A record whose value is not JSON is counted ``not_turns``, not written."""
    with tempfile.TemporaryFile(prefix="stream-app-export-") as spool:
        counts, chosen = await spool_turns(
            settings,
            spool,
            bootstrap=bootstrap,
            topic=topic,
            include_open=include_open,
            clock=clock,
            progress=progress,
        )
        for _, at, length in chosen:
            spool.seek(at)
            line = spool.read(length)
            try:
                orjson.loads(line)  # written as it is: it must be JSON
            except orjson.JSONDecodeError:
                counts["not_turns"] += 1
                counts["written"] -= 1
                continue
            out.write(line)
    return counts


async def spool_turns(
    settings: Settings,
    spool: IO[bytes],
    *,
    bootstrap: str | None = None,
    topic: str | None = None,
    include_open: bool = False,
    clock: Callable[[], float] = time.time,
    progress: Callable[[int, int | None], None] | None = None,
    offsets: dict[int, tuple[int, int]] | None = None,
) -> tuple[Counter[str], list[tuple[str, int, int]]]:
    """Reads the final topic (or, with ``include_open``, the turn topic) to its end,
    appending each record as a TURNS line to ``spool`` as it comes; returns the counts and,
    for every final turn (or the latest revision of every turn) in first-emission order,
    its key and where its line is in ``spool`` (position, length).

    Memory holds each key's latest position, not its value: the values wait in the spool
    (a file: a topic is read once, in offset order, and any record may be the latest of its
    key until the end, so each is kept where the dataset can read it back by position; a
    Kafka offset would need a fetch per turn). Nothing is parsed here: the dataset's
    formats parse each chosen line once.
    """
    began = clock()
    latest = Latest()
    where: dict[bytes, tuple[int, int]] = {}  # a key's latest record's line in the spool
    counts: Counter[str] = Counter()
    size = spool.seek(0, 2)

    def one(record: ConsumerRecord[bytes, bytes]) -> None:
        nonlocal size
        if record.key is None:
            counts["not_turns"] += 1
            return
        headers = read_headers(record.headers)
        value = None if record.value is None else b""  # the index: the value is spooled
        latest.add(TurnRecord(record.partition, record.offset, record.key, value, headers))
        identity = turn_identity(record.key)
        kept = latest.records[identity]
        if kept.partition != record.partition or kept.offset != record.offset:
            return  # an older revision than the one kept (another partition's)
        if record.value is None:
            where.pop(identity, None)
            return
        line = turns_line(record.key.decode("utf-8", "replace"), record.value)
        spool.write(line)
        where[identity] = (size, len(line))
        size += len(line)

    default = settings.topic_turns if include_open else settings.topic_final
    options = client_options(settings, bootstrap)
    read = await read_to_end(options, topic or default, one, progress, offsets)
    spool.flush()
    # A record of the final topic is final whatever its final_after says (a turn closed
    # early by a session limit, or by its session's expiry, is final before it).
    chosen, selected = latest.select(began if include_open else float("inf"), True)
    counts.update(selected)
    counts["records_read"] = read
    found: list[tuple[str, int, int]] = []
    for record in chosen:
        try:
            key = record.key.decode()
        except UnicodeDecodeError:
            counts["not_turns"] += 1
            counts["written"] -= 1
            continue
        at, length = where[record.key]
        found.append((key, at, length))
    return counts, found


def summary(counts: Counter[str], include_open: bool, topic: str) -> str:
    """The export's line about what it read from ``topic``: the dataset's line follows."""
    turns = counted(counts["keys"], "turn")
    parts = [
        f"{counted(counts['records_read'], 'record')} read from topic {topic}, "
        + (
            f"the latest revision of {turns} ({counts['final']} final, {counts['open']} open)"
            if include_open
            else f"{turns} final (--include-open reads every revision of the turn topic)"
        )
    ]
    if counts["without_headers"]:
        parts.append(f"{counts['without_headers']} without revision headers (counted open)")
    if counts["deleted"]:
        parts.append(f"{counts['deleted']} deleted (tombstones)")
    if counts["not_turns"]:
        parts.append(f"{counted(counts['not_turns'], 'non-turn record')} skipped")
    return "stream-app export: " + "; ".join(parts)

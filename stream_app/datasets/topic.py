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
import sys
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
from stream_app.core.revisions import is_final, read_headers
from stream_app.datasets.options import MAX_EXAMPLE_BYTES
from stream_app.datasets.skips import SkipReason
from stream_app.datasets.turn_lines import TurnLines

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
        counts, read = await spool_turns(
            settings,
            spool,
            bootstrap=bootstrap,
            topic=topic,
            include_open=include_open,
            clock=clock,
            progress=progress,
            max_bytes=sys.maxsize,
        )
        try:
            for _, where in read.entries():
                assert not isinstance(where, SkipReason), "no line is over sys.maxsize"
                line = read.line(where)
                try:
                    orjson.loads(line)  # written as it is: it must be JSON
                except orjson.JSONDecodeError:
                    counts["not_turns"] += 1
                    counts["written"] -= 1
                    continue
                out.write(line)
        finally:
            read.close()
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
    max_bytes: int = MAX_EXAMPLE_BYTES,
) -> tuple[Counter[str], TurnLines]:
    """Reads the final topic (or, with ``include_open``, the turn topic) to its end,
    appending each record as a TURNS line to ``spool`` as it comes; returns the counts and
    the index of every final turn (or the latest revision of every turn) in ``spool``, in
    first-emission order by partition.

    The values wait in the spool (a file: a topic is read once, in offset order, and any
    record may be the latest of its key until the end, so each is kept where the dataset can
    read it back by position; a Kafka offset would need a fetch per turn); the index of
    where each key's latest is waits on disk (``TurnLines``). Nothing is parsed here: the
    dataset's formats parse each chosen line once.
    """
    began = clock()
    read = TurnLines(source=spool, max_bytes=max_bytes)
    counts: Counter[str] = Counter()
    size = spool.seek(0, 2)

    def one(record: ConsumerRecord[bytes, bytes]) -> None:
        nonlocal size
        key = record.key
        if key is None or not _utf8(key):
            counts["not_turns"] += 1
            return
        headers = read_headers(record.headers)
        if record.value is None:
            read.add_revision(record.partition, record.offset, key, headers, None)
            return
        line = turns_line(key.decode(), record.value)
        spool.write(line)
        read.add_revision(record.partition, record.offset, key, headers, (size, len(line)))
        size += len(line)

    default = settings.topic_turns if include_open else settings.topic_final
    options = client_options(settings, bootstrap)
    try:
        counts["records_read"] = await read_to_end(
            options, topic or default, one, progress, offsets
        )
    except BaseException:
        read.close()
        raise
    spool.flush()
    # A record of the final topic is final whatever its final_after says (a turn closed
    # early by a session limit, or by its session's expiry, is final before it).
    counts.update(kept_counts(read, began if include_open else float("inf")))
    return counts, read


def kept_counts(read: TurnLines, now: float) -> Counter[str]:
    """The keys of a topic's index: how many, deleted, without headers, final at ``now`` or
    open, and written (every one not deleted: an export reads every revision's latest)."""
    counts: Counter[str] = Counter()
    for deleted, final_after in read.kept():
        counts["keys"] += 1
        if deleted:
            counts["deleted"] += 1
            continue
        if final_after is None:
            counts["without_headers"] += 1
        counts["final" if is_final(final_after, now) else "open"] += 1
        counts["written"] += 1
    return counts


def _utf8(key: bytes) -> bool:
    try:
        key.decode()
    except UnicodeDecodeError:
        return False
    return True


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

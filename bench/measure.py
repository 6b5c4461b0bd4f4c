"""The measurements on a broker, each on a ``Cluster`` of its own: (a) the raw loop, (b) the
workers and (d) their latency at half load, (f) and (g) the Faust peers, and (s) the soak."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import operator
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from bench import cluster, peers
from bench.cluster import Batch, Cluster, status_kib, wait_ready
from bench.core import idle_session
from stream_app.broker.embedded import free_port
from stream_app.core.records import turn_key
from stream_app.runtime import allocator

Records = Sequence[tuple[str, bytes | None, bytes]]  # (kind, key, value)
# The worker's topics, each named by STREAM_APP_TOPIC_<KIND> after the run.
TOPICS = ("messages", "decisions", "turns", "dlq", "final")
SOAK_STEP = 10_000  # sessions fed between two samples of (s)
REST = 2 * allocator.INTERVAL + 5  # seconds (s) rests: memory goes back each interval


async def produce(
    on: Cluster,
    records: Records,
    topics: dict[str, str],
    rate: float | None = None,
    sent_at: dict[bytes, float] | None = None,
    ends: dict[TopicPartition, int] | None = None,
) -> float:
    """Produces all records (``rate`` a second if given); returns when the first went.
    ``sent_at``: when each completing message went, by turn key; ``ends``: partitions' ends."""
    producer = AIOKafkaProducer(**on.options, linger_ms=5, max_batch_size=262144)
    await producer.start()
    first = time.monotonic()
    acks = []
    try:
        for i, (kind, key, value) in enumerate(records):
            if rate is not None and (delay := first + i / rate - time.monotonic()) > 0:
                await asyncio.sleep(delay)
            acks.append(await producer.send(topics[kind], value, key=key))
            if sent_at is not None and b'"finishReason"' in value:
                doc = orjson.loads(value)
                if call := doc["message"].get("messageId"):
                    sent_at[turn_key(doc["conversationId"], call)] = time.monotonic()
        await producer.flush()
        if ends is not None:
            for meta in await asyncio.gather(*acks):
                tp = TopicPartition(meta.topic, meta.partition)
                ends[tp] = max(ends.get(tp, 0), meta.offset + 1)
    finally:
        await producer.stop()
    return first


async def raw_rate(on: Cluster, records: Records) -> float:
    """(a) aiokafka ``getmany`` -> ``orjson.loads`` -> ``send`` without awaiting each ->
    flush, from the first batch read to the last record sent."""
    run = on.new_run()
    source, sink = f"{run}-raw-in", f"{run}-raw-out"
    await on.create_topics([source, sink])
    await produce(on, records, {"messages": source, "decisions": source})
    producer = AIOKafkaProducer(**on.options, linger_ms=5, max_batch_size=262144)
    await producer.start()
    started, left = 0.0, len(records)

    async def send(batch: Batch, now: float) -> bool:
        nonlocal started, left
        started = started or (now if batch else 0.0)
        for r in batch:
            await producer.send(sink, peers.passthrough_value(r.value), key=r.key)
        left -= len(batch)
        return left == 0

    try:
        await on.read_until(source, send, lambda: f"{left} records not read")
        await producer.flush()
        return len(records) / (time.monotonic() - started)
    finally:
        await producer.stop()


@contextlib.asynccontextmanager
async def running(
    on: Cluster,
    count: int,
    workdir: Path,
    settings: dict[str, str] | None = None,
    checkout: Path | None = None,
) -> AsyncIterator[tuple[str, dict[str, str], list[subprocess.Popen[bytes]], list[int]]]:
    """``count`` ready workers (their group, topics, processes and ports) on topics of their
    own, with more ``STREAM_APP_*`` ``settings``, ``checkout``'s code (``bench.ab``) or ours."""
    group = on.new_run()  # the app id: Faust's consumer group, and its changelogs' prefix
    topics = {kind: f"{group}-{kind}" for kind in TOPICS}
    await on.create_topics(list(topics.values()))
    ports = [free_port() for _ in range(count)]
    processes = []
    try:
        for i, port in enumerate(ports):
            env = {
                **os.environ,
                **on.worker_env,
                **({"PYTHONPATH": str(checkout)} if checkout else {}),
                "STREAM_APP_BROKER_URL": on.bootstrap,
                "STREAM_APP_ID": group,
                **{f"STREAM_APP_TOPIC_{kind.upper()}": t for kind, t in topics.items()},
                "STREAM_APP_PARTITIONS": str(on.partitions),
                "STREAM_APP_WEB_PORT": str(port),
                "STREAM_APP_WEB_HOST": "127.0.0.1",
                "STREAM_APP_DATA_DIR": str(workdir / f"{group}-{i}-data"),  # ./data is shared
                **(settings or {}),
            }
            with open(workdir / f"{group}-{i}.log", "ab") as log:
                command = [sys.executable, "-m", "stream_app", "worker", "--loglevel", "warning"]
                processes.append(
                    subprocess.Popen(command, env=env, cwd=checkout, stdout=log, stderr=log)
                )
        deadline = time.monotonic() + 60
        for port in ports:
            wait_ready(port, deadline)
        await asyncio.sleep(1.0)  # let the group's last join settle before timing
        yield group, topics, processes, ports
    finally:
        for p in processes:  # killed: what was measured is read, the state is thrown away
            p.kill()
            p.wait(30)


async def worker_rate(
    on: Cluster,
    records: Records,
    expected: dict[str, int],
    count: int,
    workdir: Path,
    checkout: Path | None = None,
    rate: float | None = None,
    alongside: Callable[[list[int]], Awaitable[object]] | None = None,
    alongside_topics: Callable[[list[int], dict[str, str]], Awaitable[object]] | None = None,
) -> dict[str, float]:
    """(b) ``count`` workers to the last expected turn read and **sustained** (until their
    group has committed every input partition to its end, after the state of every record
    is on the changelogs), with what ``HEADER`` names; (d) at ``rate``, the latency from
    each completing message produced to its turn read, p50 and p99. ``alongside`` (given the
    workers' web ports) and ``alongside_topics`` (and their topics) load the workers
    meanwhile, until the last turn is read (``bench.telemetry``)."""
    sent: dict[bytes, float] = {}
    arrived: dict[bytes, float] = {}
    seen: dict[str, int] = {}

    async def read(batch: Batch, now: float) -> bool:
        for r in batch:
            arrived.setdefault(r.key, now)
            seen[r.key.decode()] = r.value.count(b'"decision_id"')
        return seen == expected

    def missing() -> str:
        return f"{len(set(expected) - set(seen))} of {len(expected)} turns missing"

    async with running(on, count, workdir, checkout=checkout) as (group, topics, processes, ports):
        pids = [p.pid for p in processes]
        ends: dict[TopicPartition, int] = {}
        cpu = sum(cluster.process_cpu_seconds(pid) for pid in pids)
        busy, began = cluster.machine_busy_seconds(), time.monotonic()
        reading = asyncio.create_task(on.read_until(topics["turns"], read, missing))
        # More load on the workers' web ports while they work (``bench.telemetry``).
        loads = [alongside(ports)] if alongside is not None else []
        loads += [alongside_topics(ports, topics)] if alongside_topics is not None else []
        load = asyncio.ensure_future(asyncio.gather(*loads)) if loads else None
        first = await produce(on, records, topics, rate, sent, ends)
        last = await reading
        if load is not None:
            load.cancel()
            await asyncio.gather(load, return_exceptions=True)
        committed = await committed_to_end(on, group, ends)
        cpu = sum(cluster.process_cpu_seconds(pid) for pid in pids) - cpu
        busy, wall = cluster.machine_busy_seconds() - busy, time.monotonic() - began
        lag = [loop_lag(port) for port in ports]
        rss = max(status_kib(pid, "VmHWM") for pid in pids) / 1024
        changelog = await changelog_totals(on, group)
    n = len(records)
    times = sorted(arrived[k] - sent[k] for k in sent if k in arrived)  # p99: nearest rank
    p50, p99 = (times[int(q * (len(times) - 1))] * 1000 for q in (0.5, 0.99)) if rate else (0, 0)
    latency = (
        {"paced_at": rate, "p50_ms": p50, "p99_ms": p99, "samples": len(times)} if rate else {}
    )
    return {
        "workers": count,
        "records_per_s": n / (committed - first),
        "to_last_turn_records_per_s": n / (last - first),
        "worker_cpu_us_per_record": cpu / n * 1e6,
        "worker_cpu_seconds": cpu,
        "machine_busy_cores": busy / wall,  # whoever used them: broker and bench included
        "changelog_records_per_record": changelog["records"] / n,
        "changelog_bytes_per_record": changelog["bytes"] / n,
        "loop_lag_p99_ms": max(p99 for p99, _ in lag) * 1000,
        "loop_lag_max_ms": max(worst for _, worst in lag) * 1000,
        "peak_rss_mib": rss,
        **latency,
    }


HEADER = (
    "workers  records/s  per worker  efficiency  to last turn  CPU/record  changelog/record  "
    "loop lag p99/max  peak RSS  busy cores"
)


def row(m: dict[str, float], first: dict[str, float]) -> str:
    """(b) under ``HEADER``; efficiency: the rate per worker against ``first``'s (1.00 linear)."""
    per = m["records_per_s"] / m["workers"]
    cells = (
        f"{m['workers']:.0f}",
        f"{m['records_per_s']:,.0f}",
        f"{per:,.0f}",
        f"{per * first['workers'] / first['records_per_s']:.2f}",
        f"{m['to_last_turn_records_per_s']:,.0f}",
        f"{m['worker_cpu_us_per_record']:.0f} µs",
        f"{m['changelog_records_per_record']:.2f}, {m['changelog_bytes_per_record']:.0f} B",
        f"{m['loop_lag_p99_ms']:.0f} / {m['loop_lag_max_ms']:.0f} ms",
        f"{m['peak_rss_mib']:.0f} MiB",
        f"{m['machine_busy_cores']:.2f} of {os.cpu_count()}",
    )
    titles = HEADER.split("  ")
    return "  ".join(cell.rjust(len(title)) for title, cell in zip(titles, cells, strict=True))


def metric(port: int, name: str) -> list[tuple[str, float]]:
    """The series of ``name`` in a worker's ``/metrics``: (labels, value)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        lines = r.read().decode().splitlines()
    found = [line[len(name) :].rsplit(" ", 1) for line in lines if line.startswith(name)]
    return [(labels, float(value)) for labels, value in found if labels[:1] in ("", "{")]


def loop_lag(port: int) -> tuple[float, float]:
    """A worker's event-loop lag, seconds: p99 (its histogram bucket's bound) and max; 0
    from a worker that does not export it."""
    worst = max((v for _, v in metric(port, "stream_app_event_loop_lag_max_seconds")), default=0)
    buckets = metric(port, "stream_app_event_loop_lag_seconds_bucket")
    total = buckets[-1][1] if buckets else 0.0
    bounds = [float(labels.split('le="')[1].split('"')[0]) for labels, _ in buckets]
    p99 = next((b for b, (_, n) in zip(bounds, buckets, strict=True) if n >= 0.99 * total), 0)
    return min(p99, worst), worst  # a bucket's bound can be past the worst seen


async def committed_to_end(
    on: Cluster, group: str, ends: dict[TopicPartition, int], timeout: float = 600
) -> float:
    """When ``group`` has committed every partition of ``ends`` to its end."""
    admin = AIOKafkaAdminClient(**on.options)
    await admin.start()
    deadline = time.monotonic() + timeout
    try:
        while True:
            # Named partitions: tansu mis-encodes the answer for "all of them".
            offsets = await admin.list_consumer_group_offsets(group, partitions=list(ends))
            if all(tp in offsets and offsets[tp].offset >= end for tp, end in ends.items()):
                return time.monotonic()
            if time.monotonic() > deadline:
                raise TimeoutError(f"{group} has not committed {ends} after {timeout:.0f} s")
            await asyncio.sleep(0.05)
    finally:
        await admin.close()


async def changelog_totals(on: Cluster, app_id: str) -> dict[str, int]:
    """Records and bytes (keys and values) on the app's table changelogs, read together,
    each until a second passes with nothing new (tansu answers ListOffsets short)."""
    changelogs = [t for t in await on.topics((app_id,)) if t.endswith("-changelog")]
    totals = {"records": 0, "bytes": 0}

    async def read(topic: str) -> None:
        last = time.monotonic()

        async def idle(batch: Batch, now: float) -> bool:
            nonlocal last
            if batch:
                last = now
                totals["records"] += len(batch)
                totals["bytes"] += sum(len(r.key or b"") + len(r.value or b"") for r in batch)
            return now - last >= 1.0

        await on.read_until(topic, idle, lambda: "never idle")

    await asyncio.gather(*(read(topic) for topic in changelogs))
    return totals


async def peer_rate(on: Cluster, records: Records, kind: str, workdir: Path) -> dict[str, float]:
    """(f), (g) A ``bench/peers.py`` app, timed as the worker is, to its last output read,
    and its peak RSS."""
    run = on.new_run()
    topics = {kind: f"{run}-{kind}" for kind in ("messages", "decisions", "output")}
    await on.create_topics(list(topics.values()))
    left = collections.Counter((k, peers.expected_output(kind, v)) for _, k, v in records)

    async def read(batch: Batch, now: float) -> bool:
        for r in batch:
            if left[r.key, r.value] > 0:
                left[r.key, r.value] -= 1
        return left.total() == 0

    process, port = peers.start(kind, on, run, topics, workdir)

    def alive() -> bool:
        return process.poll() is None

    try:
        wait_ready(port, time.monotonic() + 60, alive)
        await asyncio.sleep(1.0)  # as for the worker
        missing = lambda: f"{left.total()} outputs missing"  # noqa: E731
        reading = asyncio.create_task(on.read_until(topics["output"], read, missing, alive))
        first = await produce(on, records, topics)
        rate = len(records) / (await reading - first)
        return {"records_per_s": rate, "peak_rss_mib": status_kib(process.pid, "VmHWM") / 1024}
    finally:
        process.kill()
        process.wait(30)


async def soak(sessions: int, ttl: float, args: Any) -> dict[str, Any]:
    """(s) One worker's RSS as idle sessions (a finished call each) arrive ``SOAK_STEP`` at
    a time, at rest with them all (after ``REST``), and at rest again once every one has
    outlived ``ttl`` and the ticks deleted it; ``/metrics`` says how many it holds."""
    settings = {
        "STREAM_APP_SESSION_TTL_SECONDS": f"{ttl}",
    }
    rows: list[dict[str, float]] = []
    async with (
        cluster.fresh(args.bootstrap, args.workdir / "broker-soak.log") as on,
        running(on, 1, args.workdir, settings) as (_, topics, (process,), (port,)),
    ):
        started = time.monotonic()

        def sample(phase: str) -> dict[str, float]:
            seconds = time.monotonic() - started
            held = sum(v for _, v in metric(port, "stream_app_sessions"))
            rss = status_kib(process.pid) / 1024
            rows.append({"seconds": seconds, "sessions_held": held, "rss_mib": rss})
            print(
                f"(s) {phase:>8}: {seconds:5.0f} s, {held:7,.0f} sessions held, RSS {rss:4.0f} MiB"
            )
            return rows[-1]

        async def until(held: Callable[[float], bool], seconds: float, phase: str) -> None:
            deadline = time.monotonic() + seconds
            while not held(sample(phase)["sessions_held"]):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{phase}: not done after {seconds:.0f} s")
                await asyncio.sleep(5)

        sample("start")
        for first in range(0, sessions, SOAK_STEP):
            last = min(first + SOAK_STEP, sessions)
            ids = [f"soak-{i}" for i in range(first, last)]
            await produce(on, [(k, s.encode(), v) for s in ids for k, v in idle_session(s)], topics)
            await until(partial(operator.le, last), 300, "feeding")  # last <= held
        await asyncio.sleep(REST)
        held = sample("held")
        await until(lambda n: n == 0, ttl + 300, "expiring")
        await asyncio.sleep(REST)
        expired = sample("expired")
    return {
        "sessions": sessions,
        "ttl_seconds": ttl,
        "rss_mib_at_most_sessions": held["rss_mib"],
        "peak_rss_mib_while_feeding": max(r["rss_mib"] for r in rows if r is not held),
        "rss_mib_after_expiry": expired["rss_mib"],
        "samples": rows,
    }

"""``python -m bench``: the worker's speed against a raw Kafka loop, measured in one run.

On the embedded broker, a fresh one for each measurement (or on your own cluster, with
``--bootstrap``: ``bench/cluster.py``), over the same generated workload:

- (a) raw: aiokafka ``getmany`` -> ``orjson.loads`` -> ``send`` without awaiting each -> flush;
- (b) the worker end to end, one process and two, **sustained**: from the first record
  produced until the group has committed every input partition to its end (after the
  state of every record is on the changelogs); also to the last expected turn read (about
  half the work comes after it), the workers' CPU per input record (/proc) and the
  changelog records and bytes per input record;
- (c) the core alone: in-process replay, records/s;
- (d) latency p50/p99 from producing a completing message to reading its turn, with the
  input paced at half of (b)'s sustained rate;
- (e) peak RSS of the worker, and state bytes and RSS growth per 10,000 idle sessions;
- (f) a tuned Faust passthrough agent (``bench/peers.py``: parse, send per event) and
- (g) a naive Faust table agent (``table[key] = value`` + send per event), each in its own
  process, timed as (b) on the same records: from the first record produced until every
  expected output has been read back.

Ratios are against (a) from the same run, and use the sustained rates: the machines are
shared and noisy. The goals are printed too: worker x1 / raw 0.20, x2 0.30.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import gc
import io
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from bench import bounded, broker, cluster, compression, paced, peers, redaction, stages
from bench.cluster import Cluster
from bench.cpu import CpuTimeline, ends, machine_busy_seconds, process_cpu_seconds
from bench.reading import from_the_start, peak_rss_kib, wait_ready
from bench.workload import generate
from stream_app import heap
from stream_app.cli import bootstrap_argument, tune_gc
from stream_app.config import Settings
from stream_app.core.policy import Policy
from stream_app.core.records import SourceRecord, TopicKind, turn_key
from stream_app.embedded_broker import WORKER_SETTINGS, free_port
from stream_app.pipeline import Pipeline
from stream_app.replay import record_value, replay
from stream_app.state.memory import MemorySessions

SOAK_STEP = 10_000  # sessions fed between two samples of (s)
REST = 2 * heap.INTERVAL + 5  # seconds (s) rests before it samples a worker at rest
PARTITIONS = 4
# Every consumer here waits as briefly as the worker does: tansu holds each fetch for the
# whole wait, so a longer one would time the reader, not the worker.
FETCH_WAIT_MS = int(WORKER_SETTINGS["STREAM_APP_FETCH_MAX_WAIT_MS"])
RESULTS = Path(__file__).resolve().parent / "results"


def encoded(lines: list[dict[str, Any]]) -> list[tuple[str, bytes | None, bytes]]:
    out = []
    for line in lines:
        value = line["value"]
        raw = record_value(value)
        out.append((line["topic"], None if line["key"] is None else line["key"].encode(), raw))
    return out


# -- (c) the core alone -------------------------------------------------------------------


def core_rate(lines: list[dict[str, Any]], rounds: int = 3) -> tuple[float, dict[str, int]]:
    """Records/s of in-process replay, and the final decision count of every turn. Timed
    as the naive reference core is (``stages.reference_rate``): CPU seconds, the best of
    ``rounds``, so that their ratio compares the cores and not the machine's noise."""
    payload = [orjson.dumps(line) for line in lines]
    tune_gc()  # as `stream-app replay` does
    best = float("inf")
    for _ in range(rounds):
        turns, dlq = io.BytesIO(), io.BytesIO()
        run = partial(replay, payload, Settings(), turns, dlq)
        best = min(best, stages.cpu_seconds(run))
    final: dict[str, int] = {}
    for line in turns.getvalue().splitlines():
        doc = orjson.loads(line)
        final[doc["key"]] = len(doc["value"]["decisions"])
    return len(lines) / best, final


def state_footprint(sessions: int = 10_000) -> dict[str, float]:
    """Idle sessions (one finished call each, nothing pending): bytes of state and RSS."""
    pipeline = Pipeline(Policy(org_id="default"), MemorySessions(), clock=lambda: 0.0)
    gc.collect()
    before = _rss_kib()
    for i in range(sessions):
        for offset, (kind, value) in enumerate(_idle_session(f"idle-{i}")):
            pipeline.process(SourceRecord(kind, kind, 0, i * 10 + offset, None, value))
    gc.collect()
    grown = _rss_kib() - before
    store = pipeline.store
    states = [store.get(s) for s in store.session_ids()]
    serialized = sum(len(state.to_json()) for state in states if state is not None)
    return {
        "sessions": sessions,
        "state_bytes_per_session": serialized / sessions,
        "rss_kib_per_10k_sessions": grown * 10_000 / sessions,
    }


def _idle_session(sid: str) -> list[tuple[TopicKind, bytes]]:
    user = {
        "conversationId": sid,
        "message": {"role": 1, "messageId": f"{sid}-u", "content": [{"text": "fix the bug"}]},
    }
    answer = {
        "conversationId": sid,
        "message": {
            "role": 2,
            "messageId": f"{sid}-a",
            "finishReason": "stop",
            "content": [{"text": "done"}],
        },
    }
    return [("messages", orjson.dumps(user)), ("messages", orjson.dumps(answer))]


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


# -- broker helpers -----------------------------------------------------------------------


async def create_topics(on: Cluster, names: list[str]) -> None:
    admin = AIOKafkaAdminClient(**on.options)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(n, PARTITIONS, on.replication) for n in names])
    finally:
        await admin.close()


async def produce(
    on: Cluster,
    records: list[tuple[str, bytes | None, bytes]],
    topics: dict[str, str],
    rate: float | None = None,
    sent_at: dict[bytes, float] | None = None,
    ends: dict[TopicPartition, int] | None = None,
) -> float:
    """Produces all records (at ``rate`` per second if given); returns when the first went.
    ``ends`` gets each partition's end: the offset after the last record produced to it."""
    producer = AIOKafkaProducer(**on.options, linger_ms=5, max_batch_size=262144)
    await producer.start()
    first = time.monotonic()
    acks = []
    try:
        for i, (kind, key, value) in enumerate(records):
            if rate is not None:
                delay = first + i / rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            acks.append(await producer.send(topics[kind], value, key=key))
            if sent_at is not None and b'"finishReason"' in value:
                doc = orjson.loads(value)
                call = doc["message"].get("messageId")
                if call:
                    # The turn's key on the turn topic (issue 10 item 4).
                    sent_at[turn_key(doc["conversationId"], call)] = time.monotonic()
        await producer.flush()
        if ends is not None:
            for meta in await asyncio.gather(*acks):
                tp = TopicPartition(meta.topic, meta.partition)
                ends[tp] = max(ends.get(tp, 0), meta.offset + 1)
    finally:
        await producer.stop()
    return first


async def read_turns(
    on: Cluster,
    topic: str,
    expected: dict[str, int],
    timeout: float,
    arrived_at: dict[bytes, float] | None = None,
) -> float:
    """Reads the turn topic until every expected turn has its final decision count."""
    consumer = await from_the_start(on.options, topic, PARTITIONS, FETCH_WAIT_MS)
    seen: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    try:
        while True:
            batch = await consumer.getmany(timeout_ms=200, max_records=10_000)
            now = time.monotonic()
            for records in batch.values():
                for r in records:
                    if arrived_at is not None and r.key not in arrived_at:
                        arrived_at[r.key] = now
                    seen[r.key.decode()] = r.value.count(b'"decision_id"')
            if seen == expected:
                return now
            if now > deadline:
                missing = len(set(expected) - set(seen))
                raise TimeoutError(
                    f"{missing} of {len(expected)} turns missing after {timeout:.0f} s"
                )
    finally:
        await consumer.stop()


# -- (a) raw baseline ---------------------------------------------------------------------


async def raw_rate(on: Cluster, records: list[tuple[str, bytes | None, bytes]]) -> float:
    run = on.new_run()
    source, sink = f"{run}-raw-in", f"{run}-raw-out"
    await create_topics(on, [source, sink])
    await produce(on, records, {"messages": source, "decisions": source})
    consumer = AIOKafkaConsumer(
        source,
        **on.options,
        group_id=run,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_partition_fetch_bytes=4 * 1048576,
        fetch_max_wait_ms=FETCH_WAIT_MS,
    )
    producer = AIOKafkaProducer(**on.options, linger_ms=5, max_batch_size=262144)
    await consumer.start()
    await producer.start()
    try:
        done, started = 0, None
        while done < len(records):
            batch = await consumer.getmany(timeout_ms=500, max_records=5000)
            if started is None and batch:
                started = time.monotonic()
            for recs in batch.values():
                for r in recs:
                    try:
                        out = orjson.dumps(orjson.loads(r.value))
                    except orjson.JSONDecodeError:
                        out = r.value  # the bad ones go out as they came, like dead letters
                    await producer.send(sink, out, key=r.key)
                done += sum(len(recs) for recs in batch.values())
        await producer.flush()
        assert started is not None
        return len(records) / (time.monotonic() - started)
    finally:
        await consumer.stop()
        await producer.stop()


# -- (b), (d), (e) the worker -------------------------------------------------------------


class Workers:
    def __init__(
        self,
        on: Cluster,
        count: int,
        workdir: Path,
        settings: dict[str, str] | None = None,
    ) -> None:
        run = on.new_run()
        self.group = run  # the app id: Faust's consumer group, and its changelogs' prefix
        self.topics = {kind: f"{run}-{kind}" for kind in ("messages", "decisions", "turns", "dlq")}
        self.processes: list[subprocess.Popen[bytes]] = []
        self.ports: list[int] = []
        for i in range(count):
            port = free_port()
            env = {
                **os.environ,
                **on.worker_env,
                "STREAM_APP_BROKER_URL": on.bootstrap,
                "STREAM_APP_ID": self.group,
                "STREAM_APP_TOPIC_MESSAGES": self.topics["messages"],
                "STREAM_APP_TOPIC_DECISIONS": self.topics["decisions"],
                "STREAM_APP_TOPIC_TURNS": self.topics["turns"],
                "STREAM_APP_TOPIC_DLQ": self.topics["dlq"],
                "STREAM_APP_PARTITIONS": str(PARTITIONS),
                "STREAM_APP_WEB_PORT": str(port),
                "STREAM_APP_WEB_HOST": "127.0.0.1",
                # Each its own state directory: the default, ./data, would be shared by the
                # runs (a later one reads an earlier one's offsets) and locked by a second
                # worker.
                "STREAM_APP_DATA_DIR": str(workdir / f"worker-{run}-{i}-data"),
                **(settings or {}),
            }
            log = open(workdir / f"worker-{run}-{i}.log", "ab")  # noqa: SIM115
            self.processes.append(
                subprocess.Popen(
                    [sys.executable, "-m", "stream_app", "worker", "--loglevel", "warning"],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
            self.ports.append(port)

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        for port in self.ports:
            wait_ready(port, deadline)

    def peak_rss_mib(self) -> float:
        return max(peak_rss_kib(p.pid) for p in self.processes) / 1024

    def stop(self) -> None:
        for p in self.processes:
            p.terminate()
        for p in self.processes:
            p.wait(30)


@contextlib.asynccontextmanager
async def running(
    on: Cluster, count: int, workdir: Path, settings: dict[str, str] | None = None
) -> AsyncIterator[Workers]:
    """``count`` ready workers on their own topics (``settings``: more ``STREAM_APP_*``);
    stopped on the way out."""
    workers = Workers(on, count, workdir, settings)
    await create_topics(on, list(workers.topics.values()))
    try:
        workers.wait_ready()
        yield workers
    finally:
        workers.stop()


async def worker_rate(
    on: Cluster,
    records: list[tuple[str, bytes | None, bytes]],
    expected: dict[str, int],
    count: int,
    workdir: Path,
) -> dict[str, float]:
    """The workers' rate to the last turn read, and **sustained**: until their group has
    committed every input partition to its end, which comes after the state of every
    record is on the changelogs. With their CPU per input record (from /proc) and what the
    changelogs took per input record."""
    async with running(on, count, workdir) as workers:
        await asyncio.sleep(1.0)  # let a second worker's join settle before timing
        pids = [p.pid for p in workers.processes]
        m = await sustained(on, workers.topics, workers.group, pids, records, expected)
        lag = [loop_lag(port) for port in workers.ports]
        return {
            **m,
            "peak_rss_mib": workers.peak_rss_mib(),
            "loop_lag_p99_ms": max(p99 for p99, _ in lag) * 1000,
            "loop_lag_max_ms": max(worst for _, worst in lag) * 1000,
        }


async def sustained(
    on: Cluster,
    topics: dict[str, str],
    group: str,
    pids: list[int],
    records: list[tuple[str, bytes | None, bytes]],
    expected: dict[str, int],
) -> dict[str, float]:
    """Produces ``records`` to ready workers (``pids``, consumer group ``group``) and times
    them to the last turn read and until every input offset is committed, with their CPU
    and the changelog records and bytes, all per input record."""
    ends: dict[TopicPartition, int] = {}
    broker = [] if on.broker_pid is None else [on.broker_pid]
    cpu = sum(process_cpu_seconds(pid) for pid in pids)
    broker_cpu = sum(process_cpu_seconds(pid) for pid in broker)
    busy, began = machine_busy_seconds(), time.monotonic()
    reading = asyncio.create_task(read_turns(on, topics["turns"], expected, 600))
    first = await produce(on, records, topics, ends=ends)
    last = await reading
    committed = await committed_to_end(on, group, ends, timeout=600)
    cpu = sum(process_cpu_seconds(pid) for pid in pids) - cpu
    broker_cpu = sum(process_cpu_seconds(pid) for pid in broker) - broker_cpu
    busy, wall = machine_busy_seconds() - busy, time.monotonic() - began
    changelog = await changelog_totals(on, group)
    n = len(records)
    return {
        "to_last_turn_records_per_s": n / (last - first),
        "records_per_s": n / (committed - first),
        "worker_cpu_us_per_record": cpu / n * 1e6,
        # Who had the cores meanwhile: at the machine's every core, a faster rate needs
        # less CPU a record from someone (the embedded broker's, when it is the one).
        "machine_busy_cores": busy / wall,
        **({"broker_cpu_us_per_record": broker_cpu / n * 1e6} if broker else {}),
        "changelog_records_per_record": changelog["records"] / n,
        "changelog_bytes_per_record": changelog["bytes"] / n,
        "changelog_records": changelog["records"],
    }


def loop_lag(port: int) -> tuple[float, float]:
    """The worker's event-loop lag: p99 (the upper bound of its histogram bucket) and max."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        text = r.read().decode()
    buckets: list[tuple[float, float]] = []
    worst = 0.0
    for line in text.splitlines():
        if line.startswith("stream_app_event_loop_lag_seconds_bucket{"):
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float(bound), float(line.rsplit(" ", 1)[1])))
        elif line.startswith("stream_app_event_loop_lag_max_seconds "):
            worst = float(line.split()[1])
    total = buckets[-1][1] if buckets else 0.0
    p99 = next((bound for bound, n in buckets if n >= 0.99 * total), 0.0)
    return min(p99, worst), worst  # a bucket's bound can be past the worst seen


async def committed_to_end(
    on: Cluster, group: str, ends: dict[TopicPartition, int], timeout: float
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


CHANGELOGS = ("sessions", "entries", "turn_bodies", "decisions")


async def changelog_totals(on: Cluster, app_id: str) -> dict[str, int]:
    """Records and bytes (keys and values) on the app's table changelogs, read until idle
    (tansu answers ListOffsets short, BROKER-NOTES.md)."""
    totals = {"records": 0, "bytes": 0}
    for table in CHANGELOGS:
        consumer = await from_the_start(
            on.options, f"{app_id}-{table}-changelog", PARTITIONS, FETCH_WAIT_MS
        )
        try:
            idle_since = time.monotonic()
            while time.monotonic() - idle_since < 1.0:
                batch = await consumer.getmany(timeout_ms=200, max_records=10_000)
                for recs in batch.values():
                    idle_since = time.monotonic()
                    totals["records"] += len(recs)
                    totals["bytes"] += sum(len(r.key or b"") + len(r.value or b"") for r in recs)
        finally:
            await consumer.stop()
    return totals


def _p99_ms(latencies: list[float]) -> float:
    """The 99th percentile (nearest rank) of latencies in seconds, in milliseconds."""
    return 1000 * sorted(latencies)[int(0.99 * (len(latencies) - 1))]


async def latency(
    on: Cluster,
    records: list[tuple[str, bytes | None, bytes]],
    expected: dict[str, int],
    rate: float,
    workdir: Path,
) -> dict[str, Any]:
    sent: dict[bytes, float] = {}
    arrived: dict[bytes, float] = {}
    async with running(on, 1, workdir) as workers:
        pids = {"worker": workers.processes[0].pid}
        if on.broker_pid is not None:
            pids["broker"] = on.broker_pid
        with CpuTimeline(pids) as cpu:
            reading = asyncio.create_task(
                read_turns(on, workers.topics["turns"], expected, 600, arrived)
            )
            await produce(on, records, workers.topics, rate=rate, sent_at=sent)
            await reading
    samples = sorted(arrived[k] - sent[k] for k in sent if k in arrived)
    start = min(sent.values())
    seconds: dict[int, list[float]] = collections.defaultdict(list)
    for k, at in sent.items():
        if k in arrived:
            seconds[int(at - start)].append(arrived[k] - at)
    timeline = [
        {
            "second": second,
            "turns": len(xs),
            "p50_ms": 1000 * statistics.median(xs),
            "p99_ms": _p99_ms(xs),
            # The cores each used that second: tansu's grow with what it holds (broker.py).
            **{
                f"{name}_cores": cores[second] if second < len(cores) else None
                for name, cores in cpu.cores.items()
            },
        }
        for second, xs in sorted(seconds.items())
    ]
    last = max(seconds)
    head = [x for second, xs in seconds.items() if second < 5 for x in xs]
    tail = [x for second, xs in seconds.items() if second > last - 5 for x in xs]
    return {
        "p50_ms": 1000 * statistics.median(samples),
        "p99_ms": _p99_ms(samples),
        # Beside the broker's cores of the same seconds: how much of the tail is it slowing.
        "p99_ms_first_last_5s": [_p99_ms(head), _p99_ms(tail)],
        "samples": len(samples),
        "timeline": timeline,
        **{f"{name}_cores_first_last_5s": ends(cores) for name, cores in cpu.cores.items()},
    }


# -- (f), (g) Faust peers ------------------------------------------------------------------


async def peer_rate(
    on: Cluster,
    records: list[tuple[str, bytes | None, bytes]],
    kind: str,
    workdir: Path,
) -> tuple[float, float]:
    """Records/s of a ``bench/peers.py`` app, timed as the worker is, and its peak RSS."""
    run = on.new_run()
    topics = {kind: f"{run}-{kind}" for kind in ("messages", "decisions", "output")}
    await create_topics(on, list(topics.values()))
    expected = collections.Counter(
        (key, peers.expected_output(kind, value)) for _, key, value in records
    )
    peer = peers.Peer(kind, on, run, topics, PARTITIONS, workdir)
    try:
        peer.wait_ready()
        await asyncio.sleep(1.0)  # as for the worker
        reading = asyncio.create_task(
            peers.read_outputs(
                on.options,
                topics["output"],
                PARTITIONS,
                expected,
                timeout=600,
                fetch_wait_ms=FETCH_WAIT_MS,
                alive=peer.alive,
            )
        )
        first = await produce(on, records, topics)
        last, read = await reading
        if read != len(records):
            print(f"    ({kind}: {read:,} outputs read for {len(records):,} records)")
        return len(records) / (last - first), peer.peak_rss_mib()
    finally:
        peer.stop()


def expected_for(lines: list[dict[str, Any]]) -> dict[str, int]:
    return core_rate(lines, rounds=1)[1]


async def main(args: argparse.Namespace) -> dict[str, Any]:
    footprint = state_footprint()  # first, while the heap is still small
    print(
        f"(e) idle session: {footprint['state_bytes_per_session']:.0f} bytes of state, "
        f"{footprint['rss_kib_per_10k_sessions'] / 1024:.1f} MiB RSS per 10k",
        flush=True,
    )
    lines = list(generate(args.records, args.sessions, seed=3))
    records = encoded(lines)
    size = statistics.mean(len(v) for _, _, v in records)
    print(
        f"workload: {len(records):,} records over {args.sessions:,} sessions, "
        f"{size:.0f} bytes on average",
        flush=True,
    )
    core, expected = core_rate(lines)
    print(f"(c) core alone: {core:,.0f} records/s; {len(expected):,} turns", flush=True)
    naive_core = stages.reference_rate(lines)
    floor_core = stages.floor_rate(lines)
    least_core = stages.least_rate(lines)
    by_stage = stages.stage_table(lines[: args.worker_records])
    print(stages.report(by_stage, core, naive_core, floor_core, least_core), flush=True)

    n = args.worker_records
    subset = records[:n]
    subset_expected = expected_for(lines[:n]) if n < len(records) else expected
    workdir = Path(tempfile.mkdtemp(prefix="bench-"))
    # Each measurement on a fresh embedded broker, or on the user's cluster and cleaned up
    # after (bench/cluster.py).
    async with cluster.fresh(args.bootstrap, workdir / "broker-raw.log") as on:
        raw = await raw_rate(on, records)
    print(f"(a) raw aiokafka loop: {raw:,.0f} records/s", flush=True)
    measured = {}
    for count in (1, 2):
        async with cluster.fresh(args.bootstrap, workdir / f"broker-x{count}.log") as on:
            m = await worker_rate(on, subset, subset_expected, count, workdir)
        measured[count] = m
        print(
            f"(b) worker x{count}: {m['records_per_s']:,.0f} records/s sustained "
            f"({m['records_per_s'] / raw:.1%} of raw), {m['to_last_turn_records_per_s']:,.0f} "
            f"to the last turn; {m['worker_cpu_us_per_record']:.0f} µs of worker CPU, "
            f"{m['changelog_records_per_record']:.2f} changelog records and "
            f"{m['changelog_bytes_per_record']:.0f} changelog bytes per input record; "
            f"the machine {m['machine_busy_cores']:.2f} of {os.cpu_count()} cores busy"
            + (
                f", the broker {m['broker_cpu_us_per_record']:.0f} µs a record"
                if "broker_cpu_us_per_record" in m
                else ""
            ),
            flush=True,
        )
    one, two = measured[1]["records_per_s"], measured[2]["records_per_s"]
    rss_one, rss_two = measured[1]["peak_rss_mib"], measured[2]["peak_rss_mib"]
    faust_peers: dict[str, dict[str, float]] = {}
    for letter, kind in zip("fg", peers.KINDS, strict=True):
        async with cluster.fresh(args.bootstrap, workdir / f"broker-{kind}.log") as on:
            rate, rss = await peer_rate(on, subset, kind, workdir)
        faust_peers[kind] = {"records_per_s": rate, "ratio_to_raw": rate / raw, "peak_rss_mib": rss}
        print(
            f"({letter}) {peers.KINDS[kind].lower()}: {rate:,.0f} records/s "
            f"({rate / raw:.1%} of raw)",
            flush=True,
        )
    naive = faust_peers["table"]["records_per_s"]
    print(
        f"worker x1 / raw {one / raw:.3f} sustained (goal 0.20), x2 {two / raw:.3f} (0.30); "
        f"worker x1 / naive table agent {one / naive:.1f}x (floor 2x)",
        flush=True,
    )
    paced = min(len(records), int(one / 2 * args.latency_seconds))
    gc.collect()
    gc.freeze()  # this process's own pauses would be timed as the worker's latency
    async with cluster.fresh(args.bootstrap, workdir / "broker-latency.log") as on:
        lat = await latency(on, records[:paced], expected_for(lines[:paced]), one / 2, workdir)
    cores = ", ".join(
        "{} {:.2f} -> {:.2f}".format(name, *lat[f"{name}_cores_first_last_5s"])
        for name in ("broker", "worker")
        if f"{name}_cores_first_last_5s" in lat
    )
    print(
        f"(d) latency at {one / 2:,.0f} records/s: p50 {lat['p50_ms']:.0f} ms, "
        f"p99 {lat['p99_ms']:.0f} ms; cores in the first and last 5 s: {cores}",
        flush=True,
    )
    shutil.rmtree(workdir, ignore_errors=True)
    return {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "broker": args.bootstrap or "embedded",
        },
        "workload": {
            "records": len(records),
            "sessions": args.sessions,
            "mean_record_bytes": size,
            "worker_records": len(subset),
        },
        "raw_records_per_s": raw,
        "worker_x1_records_per_s": one,
        "worker_x2_records_per_s": two,
        "worker_x1": measured[1],
        "worker_x2": measured[2],
        "ratio_x1_to_raw": one / raw,
        "ratio_x2_to_raw": two / raw,
        "faust_passthrough_tuned": faust_peers["passthrough"],
        "faust_table_naive": faust_peers["table"],
        "ratio_x1_to_faust_table_naive": one / naive,
        "ratio_x1_to_faust_passthrough_tuned": one / faust_peers["passthrough"]["records_per_s"],
        "core_records_per_s": core,
        "core_stages_us_per_record": dict(by_stage),
        "reference_core_records_per_s": naive_core,
        "ratio_core_to_reference": core / naive_core,
        "floor_core_records_per_s": floor_core,
        "least_core_records_per_s": least_core,
        "latency_half_load": lat,
        "worker_peak_rss_mib": max(rss_one, rss_two),
        "state": footprint,
        "bench_peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


async def soak(sessions: int, ttl: float, bootstrap: str | None) -> dict[str, Any]:
    """(s) RSS of one worker against the sessions it holds, and after they all expired.

    Idle sessions (one finished call each) arrive in batches of ``SOAK_STEP``; the worker's
    ``/metrics`` says how many it holds. When all have arrived and the worker has rested,
    its RSS is the memory for that many sessions; then nothing arrives until every session
    has outlived ``ttl`` and the sweeps have deleted it.
    """
    workdir = Path(tempfile.mkdtemp(prefix="soak-"))
    settings = {
        "STREAM_APP_SESSION_TTL_SECONDS": str(ttl),
        "STREAM_APP_SWEEP_INTERVAL_SECONDS": "10",
    }
    rows: list[dict[str, float]] = []
    async with (
        cluster.fresh(bootstrap, workdir / "broker-soak.log") as on,
        running(on, 1, workdir, settings) as workers,
    ):
        pid, port = workers.processes[0].pid, workers.ports[0]
        started = time.monotonic()

        def sample(phase: str) -> dict[str, float]:
            row = {
                "seconds": round(time.monotonic() - started, 1),
                "sessions_held": _gauge(port, "stream_app_sessions"),
                "rss_mib": _rss_of(pid) / 1024,
            }
            rows.append(row)
            print(
                f"(s) {phase:>8}: {row['seconds']:6.0f} s  {row['sessions_held']:8,.0f} "
                f"sessions held  RSS {row['rss_mib']:5.0f} MiB",
                flush=True,
            )
            return row

        sample("start")
        for first in range(0, sessions, SOAK_STEP):
            batch: list[tuple[str, bytes | None, bytes]] = [
                (kind, sid.encode(), value)
                for i in range(first, min(first + SOAK_STEP, sessions))
                for sid in [f"soak-{i}"]
                for kind, value in _idle_session(sid)
            ]
            await produce(on, batch, workers.topics)
            deadline = time.monotonic() + 300
            while _gauge(port, "stream_app_sessions") < min(first + SOAK_STEP, sessions):
                if time.monotonic() > deadline:
                    raise TimeoutError("the worker did not take up the sessions")
                await asyncio.sleep(1)
            sample("feeding")
        # What a worker holds at rest: the allocator's free memory is given back every
        # heap.INTERVAL seconds (``stream_app/heap.py``), not while records pour in. Two
        # intervals: the last return then comes at least one interval after the last
        # record, when the worker is done with it (one interval sampled 922 MiB just
        # before a return, 557 MiB after it).
        await asyncio.sleep(REST)
        held = sample("held")
        deadline = time.monotonic() + ttl + 300
        while _gauge(port, "stream_app_sessions") > 0:
            if time.monotonic() > deadline:
                raise TimeoutError("the sessions did not expire")
            await asyncio.sleep(5)
            sample("expiring")
        gc_settled = time.monotonic() + REST  # as at rest, above
        while time.monotonic() < gc_settled:
            await asyncio.sleep(5)
        expired = sample("expired")
    shutil.rmtree(workdir, ignore_errors=True)
    return {
        "sessions": sessions,
        "ttl_seconds": ttl,
        "rss_mib_at_most_sessions": held["rss_mib"],
        "peak_rss_mib_while_feeding": max(r["rss_mib"] for r in rows if r is not held),
        "rss_mib_after_expiry": expired["rss_mib"],
        "samples": rows,
    }


def _gauge(port: int, name: str) -> float:
    """One unlabelled gauge from the worker's ``/metrics``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


def _rss_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def table(r: dict[str, Any]) -> str:
    rows = [
        ("raw aiokafka loop (a)", f"{r['raw_records_per_s']:,.0f} rec/s", "1.00"),
        (
            "worker x1 (b), sustained",
            f"{r['worker_x1_records_per_s']:,.0f} rec/s",
            f"{r['ratio_x1_to_raw']:.3f}",
        ),
        (
            "worker x1 (b), to the last turn",
            f"{r['worker_x1']['to_last_turn_records_per_s']:,.0f} rec/s",
            f"{r['worker_x1']['to_last_turn_records_per_s'] / r['raw_records_per_s']:.3f}",
        ),
        (
            "worker x2 (b), sustained",
            f"{r['worker_x2_records_per_s']:,.0f} rec/s",
            f"{r['ratio_x2_to_raw']:.3f}",
        ),
        (
            "machine's busy cores, worker x1 / x2 (b)",
            f"{r['worker_x1']['machine_busy_cores']:.2f} / "
            f"{r['worker_x2']['machine_busy_cores']:.2f} of {r['machine']['cpus']}",
            "",
        ),
        (
            "worker x1 CPU per input record (b)",
            f"{r['worker_x1']['worker_cpu_us_per_record']:.0f} µs",
            "",
        ),
        (
            "event-loop lag p99 / max, worker x1 (b)",
            f"{r['worker_x1']['loop_lag_p99_ms']:.0f} / {r['worker_x1']['loop_lag_max_ms']:.0f} ms",
            "",
        ),
        (
            "changelog records / bytes per input record (b)",
            f"{r['worker_x1']['changelog_records_per_record']:.2f} / "
            f"{r['worker_x1']['changelog_bytes_per_record']:.0f} B",
            "",
        ),
        (
            "Faust passthrough agent, tuned (f)",
            f"{r['faust_passthrough_tuned']['records_per_s']:,.0f} rec/s",
            f"{r['faust_passthrough_tuned']['ratio_to_raw']:.3f}",
        ),
        (
            "Faust table agent, naive (g)",
            f"{r['faust_table_naive']['records_per_s']:,.0f} rec/s",
            f"{r['faust_table_naive']['ratio_to_raw']:.3f}",
        ),
        ("worker x1 / raw, sustained (goal 0.20)", f"{r['ratio_x1_to_raw']:.3f}", ""),
        (
            "worker x1 / naive table agent (floor 2x)",
            f"{r['ratio_x1_to_faust_table_naive']:.2f}x",
            "",
        ),
        ("core alone (c)", f"{r['core_records_per_s']:,.0f} rec/s", ""),
        (
            "naive reference core (c); replay / it",
            f"{r['reference_core_records_per_s']:,.0f} rec/s",
            f"{r['ratio_core_to_reference']:.2f}x",
        ),
        (
            "least core (c); it / the reference",
            f"{r['least_core_records_per_s']:,.0f} rec/s",
            f"{r['least_core_records_per_s'] / r['reference_core_records_per_s']:.2f}x",
        ),
        (
            "latency p50 / p99 at half load (d)",
            f"{r['latency_half_load']['p50_ms']:.0f} / {r['latency_half_load']['p99_ms']:.0f} ms",
            "",
        ),
        (
            "latency p99, first / last 5 s of (d)",
            "{:.0f} / {:.0f} ms".format(*r["latency_half_load"]["p99_ms_first_last_5s"]),
            "",
        ),
        ("worker peak RSS (e)", f"{r['worker_peak_rss_mib']:.0f} MiB", ""),
        ("state per idle session (e)", f"{r['state']['state_bytes_per_session']:.0f} B", ""),
        (
            "RSS per 10k idle sessions (e)",
            f"{r['state']['rss_kib_per_10k_sessions'] / 1024:.1f} MiB",
            "",
        ),
    ]
    if "broker_cores_first_last_5s" in r["latency_half_load"]:  # the embedded broker's
        rows.insert(
            -3,
            (
                "broker cores, first / last 5 s of (d)",
                "{:.2f} / {:.2f}".format(*r["latency_half_load"]["broker_cores_first_last_5s"]),
                "",
            ),
        )
    width = max(len(a) for a, _, _ in rows)
    lines = [f"{'measure':<{width}}  {'value':>18}  ratio to (a)"]
    lines += [f"{a:<{width}}  {b:>18}  {c}" for a, b, c in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--bootstrap",
        type=bootstrap_argument,
        help="measure on this cluster (host:port or kafka://host:port) instead of a fresh "
        "embedded broker each time; the STREAM_APP_* settings of the environment apply "
        "(security, replication factor, timeouts), and the topics made are deleted after",
    )
    parser.add_argument(
        "--records",
        type=int,
        default=100_000,
        help="records generated; (a) and (c) run on all of them (default: %(default)s)",
    )
    parser.add_argument(
        "--sessions", type=int, default=1_000, help="sessions they belong to (default: %(default)s)"
    )
    parser.add_argument(
        "--worker-records",
        type=int,
        default=60_000,
        help="the first N records drive (b), (f) and (g) (default: %(default)s, to stay within "
        "a few minutes)",
    )
    parser.add_argument(
        "--latency-seconds",
        type=float,
        default=20.0,
        help="how long (d) paces the input at half of (b)'s rate (default: %(default)s)",
    )
    parser.add_argument(
        "--soak",
        action="store_true",
        help="only (s): one worker's RSS against sessions held and after they expired",
    )
    parser.add_argument(
        "--soak-sessions", type=int, default=100_000, help="sessions for --soak (%(default)s)"
    )
    parser.add_argument(
        "--soak-ttl",
        type=float,
        default=240.0,
        help="their time to live, longer than feeding them takes (%(default)s s)",
    )
    parser.add_argument(
        "--compression",
        action="store_true",
        help="only time the producer's codecs on the workload's turn records (no broker)",
    )
    parser.add_argument(
        "--redaction",
        action="store_true",
        help="only time Basic redaction per decision against its decode (no broker)",
    )
    parser.add_argument(
        "--stages",
        action="store_true",
        help="only the core's µs per record by stage, and replay against a naive core (no broker)",
    )
    parser.add_argument(
        "--broker",
        action="store_true",
        help="only the embedded broker's CPU, second by second, at a steady rate in and out "
        "with no worker (--broker-rate records/s for --latency-seconds)",
    )
    parser.add_argument(
        "--broker-rate", type=int, default=5_000, help="records/s for --broker (%(default)s)"
    )
    parser.add_argument(
        "--paced",
        action="store_true",
        help="only the core's CPU a record in bursts, as at half load, against flat out "
        "(no broker)",
    )
    parser.add_argument(
        "--bounded",
        action="store_true",
        help="only a record's cost and changelog writes against its session's size (no broker)",
    )
    arguments = parser.parse_args()
    if arguments.broker and arguments.bootstrap:
        parser.error("--broker measures the embedded broker; it takes no --bootstrap")
    if arguments.broker:
        size = 560  # about the workload's mean record
        seconds = int(arguments.latency_seconds)
        cores = asyncio.run(broker.measure(arguments.broker_rate, seconds, size, FETCH_WAIT_MS))
        print(broker.report(cores, arguments.broker_rate, size))
        sys.exit(0)
    if arguments.bounded:
        print(bounded.report(bounded.measure()))
        sys.exit(0)
    if arguments.paced:
        lines = list(generate(paced.RECORDS, arguments.sessions, seed=3))
        print(paced.report(paced.measure(lines), len(lines)))
        sys.exit(0)
    if arguments.stages:
        lines = list(generate(arguments.records, arguments.sessions, seed=3))
        core = core_rate(lines)[0]
        naive, bare = stages.reference_rate(lines), stages.floor_rate(lines)
        least = stages.least_rate(lines)
        print(stages.report(stages.stage_table(lines), core, naive, bare, least))
        sys.exit(0)
    if arguments.compression:
        lines = list(generate(arguments.records, arguments.sessions, seed=3))
        print(compression.report(compression.measure(lines)))
        sys.exit(0)
    if arguments.redaction:
        print(redaction.report(redaction.measure()))
        sys.exit(0)
    if arguments.soak:
        found = asyncio.run(soak(arguments.soak_sessions, arguments.soak_ttl, arguments.bootstrap))
        RESULTS.mkdir(exist_ok=True)
        out = RESULTS / f"soak-{time.strftime('%Y%m%dT%H%M%S')}.json"
        out.write_bytes(orjson.dumps(found, option=orjson.OPT_INDENT_2))
        print(f"written to {out}")
        sys.exit(0)
    arguments.worker_records = min(arguments.worker_records, arguments.records)
    result = asyncio.run(main(arguments))
    print()
    print(table(result))
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"bench-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    print(f"\nwritten to {out.relative_to(Path.cwd()) if out.is_relative_to(Path.cwd()) else out}")

"""``python -m bench``: the worker's speed, latency and memory, measured in one run over one
generated workload, each measurement on a fresh embedded broker or on ``--bootstrap``'s:

- (a) raw: aiokafka ``getmany`` -> ``orjson.loads`` -> ``send`` -> flush;
- (b) one worker and two, sustained (until the group has committed every input partition
  to its end, the state of every record on the changelogs) and to the last turn read;
  per input record their CPU and changelog writes; event-loop lag, peak RSS, busy cores;
- (c) the core alone: in-process replay, records/s of CPU time;
- (d) latency p50/p99 from a completing message produced to its turn read, the input paced
  at half of (b)'s one-worker rate, with the worker's event-loop lag;
- (e) the state and RSS an idle session takes;
- (f) a tuned Faust passthrough agent, (g) a naive Faust table agent, timed as (b).

Alone: ``--workers 1,2,4`` (b) at each count, a scaling table; ``--stages`` (c) by stage;
``--soak`` RSS against sessions held; ``--bounded``. Results: ``bench/results/*.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from bench import cluster, core, measure, peers
from bench.workload import encoded, generate
from stream_app.cli.arguments import bootstrap_argument

RESULTS = Path(__file__).resolve().parent / "results"


async def workers_at(
    args: argparse.Namespace, counts: list[int], lines: list[dict[str, Any]]
) -> list[dict[str, float]]:
    """(b) at each count, each on a fresh cluster whose topics have a partition a worker,
    printed as a scaling table."""
    records, expected = encoded(lines), core.core_rate(lines, rounds=1)[1]
    rows: list[dict[str, float]] = []
    print(f"(b) {len(records):,} records\n{measure.HEADER}", flush=True)
    for count in counts:
        log = args.workdir / f"broker-x{count}.log"
        async with cluster.fresh(args.bootstrap, log, max(4, *counts)) as on:
            rows.append(await measure.worker_rate(on, records, expected, count, args.workdir))
        print(measure.row(rows[-1], rows[0]), flush=True)
    return rows


async def main(args: argparse.Namespace) -> dict[str, Any]:
    state = core.state_footprint()  # first, while the heap is still small
    per_10k = state["rss_kib_per_10k_sessions"] / 1024
    print(
        f"(e) idle session: {state['state_bytes']:.0f} B of state, {per_10k:.1f} MiB RSS a 10,000"
    )
    lines = list(generate(args.records, args.sessions, seed=3))
    records = encoded(lines)
    size = statistics.mean(len(v) for _, _, v in records)
    print(f"workload: {len(records):,} records, {args.sessions:,} sessions, {size:.0f} B each")
    replayed = core.core_rate(lines)[0]
    print(f"(c) core alone: {replayed:,.0f} records/s", flush=True)
    async with cluster.fresh(args.bootstrap, args.workdir / "broker-raw.log") as on:
        raw = await measure.raw_rate(on, records)
    print(f"(a) raw aiokafka loop: {raw:,.0f} records/s", flush=True)
    subset = lines[: args.worker_records]
    workers = await workers_at(args, [1, 2], subset)
    print(
        "of raw: "
        + ", ".join(f"x{m['workers']:.0f} {m['records_per_s'] / raw:.3f}" for m in workers)
    )
    faust = {}
    for letter, kind in zip("fg", peers.KINDS, strict=True):
        async with cluster.fresh(args.bootstrap, args.workdir / f"broker-{kind}.log") as on:
            faust[kind] = await measure.peer_rate(on, encoded(subset), kind, args.workdir)
        rate = faust[kind]["records_per_s"]
        print(f"({letter}) {peers.KINDS[kind]}: {rate:,.0f} records/s ({rate / raw:.3f} of raw)")
    one = workers[0]["records_per_s"]
    print(f"worker x1 / naive Faust table agent: {one / faust['table']['records_per_s']:.2f}x")
    paced = lines[: int(one / 2 * args.latency_seconds)]
    expected = core.core_rate(paced, rounds=1)[1]
    gc.collect()
    gc.freeze()  # this process's own pauses would be timed as the worker's latency
    async with cluster.fresh(args.bootstrap, args.workdir / "broker-latency.log") as on:
        lat = await measure.worker_rate(on, encoded(paced), expected, 1, args.workdir, rate=one / 2)
    ms = "{p50_ms:.0f} / {p99_ms:.0f} ms; loop lag {loop_lag_p99_ms:.0f} / {loop_lag_max_ms:.0f}"
    print(f"(d) latency at {one / 2:,.0f} records/s: p50 / p99 {ms.format(**lat)} ms")
    return {
        "workload": {"records": len(records), "sessions": args.sessions, "mean_bytes": size},
        "worker_records": len(subset),
        "raw_records_per_s": raw,
        "workers": workers,
        "faust": faust,
        "core_records_per_s": replayed,
        "latency_half_load": lat,
        "state": state,
    }


def written(name: str, result: dict[str, Any], bootstrap: str | None) -> None:
    machine = dict(cpus=os.cpu_count(), python=platform.python_version(), os=platform.platform())
    machine["broker"] = bootstrap or "embedded"
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"{name}-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_bytes(orjson.dumps({"machine": machine, **result}, option=orjson.OPT_INDENT_2))
    print(f"written to {out.relative_to(Path.cwd()) if out.is_relative_to(Path.cwd()) else out}")


def counts(text: str) -> list[int]:
    found = sorted({int(n) for n in text.split(",")})
    if found[0] < 1:
        raise argparse.ArgumentTypeError("worker counts, at least 1 each: 1,2,4")
    return found


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add(
        "--bootstrap",
        type=bootstrap_argument,
        help="measure on this cluster (host:port), with the environment's STREAM_APP_* "
        "settings, instead of embedded brokers; the topics made there are deleted after",
    )
    add("--records", type=int, default=100_000, help="records generated (%(default)s)")
    add("--sessions", type=int, default=1_000, help="sessions they belong to (%(default)s)")
    add("--worker-records", type=int, default=60_000, help="the first N drive (b) to (g)")
    add("--latency-seconds", type=float, default=20.0, help="how long (d) paces its input")
    add("--workers", type=counts, help="only (b), with each of these counts: 1,2,4")
    add("--stages", action="store_true", help="only (c), and the core's µs a record by stage")
    add("--soak", action="store_true", help="only (s): RSS against sessions held, and after")
    add("--soak-sessions", type=int, default=100_000, help="sessions for --soak (%(default)s)")
    add("--soak-ttl", type=float, default=240.0, help="their time to live (%(default)s s)")
    add("--bounded", action="store_true", help="only a record's cost against its session's size")
    args = parser.parse_args()
    args.workdir = Path(tempfile.mkdtemp(prefix="bench-"))  # the processes' logs and state
    if args.bounded:
        print(core.bounded_report(core.bounded()))
    elif args.stages:
        lines = list(generate(args.records, args.sessions, seed=3))
        print(f"(c) core alone: {core.core_rate(lines)[0]:,.0f} records/s", flush=True)
        print(core.report(core.stage_table(lines[: args.worker_records])))
    elif args.soak:
        found = asyncio.run(measure.soak(args.soak_sessions, args.soak_ttl, args))
        written("soak", found, args.bootstrap)
    elif args.workers:
        lines = list(generate(args.worker_records, args.sessions, seed=3))
        rows = asyncio.run(workers_at(args, args.workers, lines))
        written("workers", {"worker_records": len(lines), "workers": rows}, args.bootstrap)
    else:
        written("bench", asyncio.run(main(args)), args.bootstrap)
    shutil.rmtree(args.workdir)

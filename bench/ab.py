"""``python -m bench.ab OTHER_CHECKOUT``: one worker of this checkout against one of another.

Each worker runs its own checkout's code (``python -m stream_app worker`` in that folder) on
a fresh embedded broker, over the same records, in turn, for a few rounds, after one raw
aiokafka loop; each prints its rate sustained (until every input offset is committed) and
to the last turn, its CPU per input record, the changelog records and bytes it wrote per
input record, and its event loop's longest lag. Both runs share the machine's noise, so
read the ratios.

``--core``: the core alone instead, each checkout's in-process replay of the same records
in a process of its own, in turn, the best of the rounds (CPU time of the replay call).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from bench import cluster
from bench.__main__ import (
    create_topics,
    encoded,
    expected_for,
    loop_lag,
    raw_rate,
    sustained,
)
from bench.cluster import Cluster
from bench.reading import wait_ready
from bench.workload import generate
from stream_app.embedded_broker import free_port

Records = list[tuple[str, bytes | None, bytes]]


async def measure(
    checkout: Path, on: Cluster, records: Records, expected: dict[str, int], work: Path
) -> dict[str, float]:
    run = on.new_run()
    topics = {kind: f"{run}-{kind}" for kind in ("messages", "decisions", "turns", "dlq")}
    await create_topics(on, list(topics.values()))
    port = free_port()
    env = {
        **os.environ,
        **on.worker_env,
        "PYTHONPATH": str(checkout),
        "STREAM_APP_BROKER_URL": on.bootstrap,
        "STREAM_APP_ID": run,
        "STREAM_APP_TOPIC_MESSAGES": topics["messages"],
        "STREAM_APP_TOPIC_DECISIONS": topics["decisions"],
        "STREAM_APP_TOPIC_TURNS": topics["turns"],
        "STREAM_APP_TOPIC_DLQ": topics["dlq"],
        "STREAM_APP_PARTITIONS": "4",
        "STREAM_APP_WEB_PORT": str(port),
        "STREAM_APP_WEB_HOST": "127.0.0.1",
        "STREAM_APP_DATA_DIR": str(work / f"data-{run}"),
    }
    with open(work / f"worker-{run}.log", "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "stream_app", "worker", "--loglevel", "warning"],
            env=env,
            cwd=checkout,  # its own code first on the path
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_ready(port, time.monotonic() + 60)
        await asyncio.sleep(1.0)
        m = await sustained(on, topics, run, [process.pid], records, expected)
        return {**m, "loop_lag_max_ms": loop_lag(port)[1] * 1000}
    finally:
        process.terminate()
        process.wait(30)


# Run in each checkout's folder, with its own code first on the path: the replay's rate.
_CORE = """
import io, sys, time
from stream_app.config import Settings
from stream_app.replay import replay
try:
    from stream_app.cli import tune_gc
except ImportError:
    tune_gc = lambda: None
lines = open(sys.argv[1], "rb").read().splitlines()
tune_gc()
started = time.process_time()
replay(lines, Settings(), io.BytesIO(), io.BytesIO())
print(len(lines) / (time.process_time() - started))
"""


def core_rates(other: Path, records_n: int, rounds: int) -> None:
    """The core alone: each checkout's replay of the same lines, in turn, best of rounds."""
    lines = list(generate(records_n, 1_000, seed=3))
    work = Path(tempfile.mkdtemp(prefix="ab-core-"))
    source = work / "workload.jsonl"
    source.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    here = Path(__file__).resolve().parent.parent
    best: dict[str, float] = {}
    for round_ in range(rounds):
        for name, checkout in (("other", other), ("this", here)):
            done = subprocess.run(
                [sys.executable, "-c", _CORE, str(source)],
                cwd=checkout,
                env={**os.environ, "PYTHONPATH": str(checkout)},
                capture_output=True,
                text=True,
                check=True,
            )
            rate = float(done.stdout.split()[-1])
            best[name] = max(best.get(name, 0.0), rate)
            print(f"{name} round {round_}: replay {rate:,.0f} records/s", flush=True)
    print(
        f"core alone, best of {rounds}: other {best['other']:,.0f}, this {best['this']:,.0f} "
        f"records/s: {best['this'] / best['other']:.2f}x",
        flush=True,
    )


async def main(other: Path, records_n: int, rounds: int) -> None:
    lines = list(generate(records_n, 1_000, seed=3))
    records, expected = encoded(lines), expected_for(lines)
    work = Path(tempfile.mkdtemp(prefix="ab-"))
    async with cluster.fresh(None, work / "raw.log") as on:
        raw = await raw_rate(on, records)
    print(f"raw aiokafka loop: {raw:,.0f} records/s", flush=True)
    here = Path(__file__).resolve().parent.parent
    for round_ in range(rounds):
        for name, checkout in (("other", other), ("this", here)):
            async with cluster.fresh(None, work / f"{name}-{round_}.log") as on:
                m = await measure(checkout, on, records, expected, work)
            rate = m["records_per_s"]
            print(
                f"{name} round {round_}: {rate:,.0f} records/s sustained ({rate / raw:.3f} "
                f"of raw), {m['to_last_turn_records_per_s']:,.0f} to the last turn, "
                f"{m['worker_cpu_us_per_record']:.0f} µs CPU, "
                f"{m['changelog_records_per_record']:.2f} changelog records and "
                f"{m['changelog_bytes_per_record']:.0f} bytes per input record; event-loop "
                f"lag max {m['loop_lag_max_ms']:.0f} ms (0: a worker that does not export it)",
                flush=True,
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__)
    parser.add_argument("other", type=Path, help="a checkout of another commit")
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--core", action="store_true", help="the core alone: each checkout's in-process replay"
    )
    args = parser.parse_args()
    if args.core:
        core_rates(args.other.resolve(), args.records, args.rounds)
    else:
        asyncio.run(main(args.other.resolve(), args.records, args.rounds))

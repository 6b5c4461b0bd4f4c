"""``python -m bench.ab OTHER_CHECKOUT``: one worker of this checkout against one of another.

Each runs its checkout's code (that folder first on the path) on a fresh embedded broker,
over the same records, in turn, for a few rounds, and prints a row of ``python -m bench``'s
(b), whose efficiency is its rate against the first row's (other, round 0). ``--core``: each
checkout's in-process replay instead, in a process of its own, best of rounds (CPU time).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

from bench import cluster, core, measure
from bench.workload import encoded, generate

HERE = Path(__file__).resolve().parent.parent

# Run in each checkout's folder, with its own code first on the path: the replay's rate.
_CORE = """
import io, sys, time
from stream_app.config import Settings
try:
    from stream_app.cli.replay import replay
    from stream_app.runtime.allocator import tune_gc
except ImportError:  # a checkout from before the package's rooms
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
    work = Path(tempfile.mkdtemp(prefix="ab-core-"))
    source = work / "workload.jsonl"
    lines = generate(records_n, 1_000, seed=3)
    source.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    best: dict[str, float] = {}
    for round_ in range(rounds):
        for name, checkout in (("other", other), ("this", HERE)):
            done = subprocess.run(
                [sys.executable, "-c", _CORE, str(source)],
                cwd=checkout,
                env={**os.environ, "PYTHONPATH": str(checkout)},
                capture_output=True,
                text=True,
                check=True,
            )
            best[name] = max(best.get(name, 0.0), float(done.stdout.split()[-1]))
            print(f"{name} round {round_}: replay {best[name]:,.0f} records/s best", flush=True)
    print(f"core alone, best of {rounds}: this / other {best['this'] / best['other']:.2f}x")


async def main(other: Path, records_n: int, rounds: int) -> None:
    lines = list(generate(records_n, 1_000, seed=3))
    records, expected = encoded(lines), core.core_rate(lines, rounds=1)[1]
    work = Path(tempfile.mkdtemp(prefix="ab-"))
    print(f"round  code   {measure.HEADER}", flush=True)
    first = None
    for round_ in range(rounds):
        for name, checkout in (("other", other), ("this", HERE)):
            async with cluster.fresh(None, work / f"{name}-{round_}.log") as on:
                m = await measure.worker_rate(on, records, expected, 1, work, checkout)
            first = first or m
            print(f"{round_:>5}  {name:<5}  {measure.row(m, first)}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__)
    parser.add_argument("other", type=Path, help="a checkout of another commit")
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--core", action="store_true", help="the core alone: in-process replay")
    args = parser.parse_args()
    if args.core:
        core_rates(args.other.resolve(), args.records, args.rounds)
    else:
        asyncio.run(main(args.other.resolve(), args.records, args.rounds))

"""``python -m bench.export``: how fast ``stream-app export`` turns a TURNS file into a dataset.

The input is the verdict workload (``bench/workload.py --verdicts``) run through replay's
core; each measurement reads the TURNS lines and writes a folder set (HF layout, redaction
on, as a user's default run), timed as process CPU and wall time, reported as input turns a
second. Formats: chat (OpenAI), chat (TRL), kto, dpo, and chat as Parquet.
"""

from __future__ import annotations

import argparse
import io
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from bench.workload import generate
from stream_app.cli.replay import replay
from stream_app.config import Settings
from stream_app.datasets.files import write_dataset
from stream_app.datasets.options import Options
from stream_app.datasets.turn_lines import read_turn_lines

CASES: list[tuple[str, dict[str, Any], bool]] = [
    ("chat (openai)", {"format": "chat"}, False),
    ("chat (trl)", {"format": "chat", "profile": "trl"}, False),
    ("kto", {"format": "kto"}, False),
    ("dpo", {"format": "dpo"}, False),
    ("chat (openai), parquet", {"format": "chat"}, True),
]


def turns_of(records: int, sessions: int, seed: int) -> bytes:
    source = b"".join(orjson.dumps(x) + b"\n" for x in generate(records, sessions, seed, True))
    out, dlq = io.BytesIO(), io.BytesIO()
    replay(io.BytesIO(source).readlines(), Settings(), out, dlq)
    return out.getvalue()


def measure(turns: bytes, options: dict[str, Any], parquet: bool, where: Path) -> dict[str, Any]:
    """One export of ``turns``: reading and writing, timed together."""
    lines = turns.splitlines()
    started, cpu = time.perf_counter(), time.process_time()
    read = read_turn_lines(lines)
    manifest = write_dataset(read, Options(**options), where, "bench", folder=True, parquet=parquet)
    wall, used = time.perf_counter() - started, time.process_time() - cpu
    written = sum(f["bytes"] for f in manifest["files"] if f["role"] == "data")
    turns_read = manifest["read"]["turns"]
    return {
        "turns": turns_read,
        "records": sum(manifest["split"]["records"].values()),
        "bytes": written,
        "wall_s": round(wall, 3),
        "turns_per_s": round(turns_read / wall),
        "turns_per_cpu_s": round(turns_read / used) if used else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    turns = turns_of(args.records, args.sessions, args.seed)
    print(f"{len(turns.splitlines()):,} turn lines ({len(turns) / 1e6:.1f} MB)")
    print(f"{'format':<24}{'turns/s':>10}{'rows':>8}{'MB out':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for n, (name, options, parquet) in enumerate(CASES):
            got = measure(turns, options, parquet, Path(tmp) / f"set{n}")
            print(
                f"{name:<24}{got['turns_per_s']:>10,}{got['records']:>8,}"
                f"{got['bytes'] / 1e6:>9.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()

"""``python -m bench.export``: how fast ``stream-app export`` turns a TURNS file into a dataset.

The input is the verdict workload (``bench/workload.py --verdicts``) run through replay's
core; each measurement reads the TURNS lines and writes a folder set (HF layout, redaction
on, as a user's default run), timed as process CPU and wall time, reported as input turns a
second. Formats: chat (OpenAI), chat (TRL), kto, dpo, and chat as Parquet.

``--memory`` measures what export holds instead: the peak RSS of ``stream-app export --from``
(a process of its own per run) on the workload and on one four times its size, and the
ratio; an export that held its input's keys or sessions would grow with it.
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
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


# The export's own peak (VmHWM of its memory after exec, not the RSS it was forked with,
# which a child's ru_maxrss counts on Linux), printed on stdout after the command.
_PEAK = (
    "import sys; from stream_app.cli import run; code = run(sys.argv[1:]); "
    "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')]; "
    "print(hwm[0].split()[1]); sys.exit(code)"
)


def peak_rss(turns: Path, arguments: list[str], out: Path) -> int:
    """The peak RSS, in KiB, of one ``stream-app export --from turns``."""
    command = [sys.executable, "-c", _PEAK, "export", "--from", str(turns)]
    done = subprocess.run(
        [*command, *arguments, "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"export {' '.join(arguments)} exited {done.returncode}")
    return int(done.stdout.split()[-1])


def memory(records: int, sessions: int, seed: int) -> None:
    """Peak RSS on the workload and on four times it (records and sessions), per format."""
    with tempfile.TemporaryDirectory() as tmp:
        inputs = []
        for times in (1, 4):
            path = Path(tmp) / f"turns-{times}x.jsonl"
            path.write_bytes(turns_of(records * times, sessions * times, seed))
            inputs.append(path)
            lines = len(path.read_bytes().splitlines())
            print(f"{times}x: {lines:,} turn lines ({path.stat().st_size / 1e6:.1f} MB)")
        print(f"{'format':<24}{'1x MiB':>8}{'4x MiB':>8}{'4x/1x':>7}")
        for n, (name, options, parquet) in enumerate(CASES):
            arguments = [f"--{k.replace('_', '-')}={v}" for k, v in options.items()]
            arguments += ["--parquet"] if parquet else []
            peaks = [
                peak_rss(path, arguments, Path(tmp) / f"set{n}-{i}/")
                for i, path in enumerate(inputs)
            ]
            print(
                f"{name:<24}{peaks[0] / 1024:>8.0f}{peaks[1] / 1024:>8.0f}"
                f"{peaks[1] / peaks[0]:>6.2f}x",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--memory", action="store_true", help="peak RSS at 1x and 4x the input")
    args = parser.parse_args()
    if args.memory:
        memory(args.records, args.sessions, args.seed)
        return
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

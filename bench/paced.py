"""``python -m bench --paced``: what a record costs the core when it comes in bursts, as at
half load, against flat out; no broker.

At half load a worker applies a few dozen records at a time, some 45 times a second, and
waits in between; flat out it never waits (``docs/benchmarks.md``, ninth and tenth rounds).
Here the same records go through the same core (replay's path) both ways in one process:
flat out, and in bursts of ``BURST`` records with ``PAUSE`` seconds between them, the wait
slept or spun. Only the thread's CPU time while records are applied is counted, so the
waits themselves cost nothing here. Rounds are interleaved in a shuffled order and the best
of each way is kept.

A spun wait keeps the core busy and the process on it: a cost that rises with it too is not
the CPU idling (its clock, the hypervisor taking the core back) but what the core's caches
and predictors lose between bursts. Whatever the cause, it is the machine's: the code and
the records are the same.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

import orjson

from stream_app.cli import tune_gc
from stream_app.config import Settings
from stream_app.pipeline import Pipeline
from stream_app.replay import records
from stream_app.state.memory import MemorySessions

RECORDS = 30_000  # about half a minute of waits each way and round
BURST = 59  # records a batch held at half load (ninth round: 759 batches, 45,000 records)
PAUSE = 0.020  # seconds between bursts: the worker's fetch wait in the benchmark


def _spin(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


WAYS: dict[str, tuple[int, float, Callable[[float], None] | None]] = {
    "flat out": (0, 0.0, None),
    f"bursts of {BURST}, {PAUSE * 1000:.0f} ms slept between": (BURST, PAUSE, time.sleep),
    f"bursts of {BURST}, {PAUSE * 1000:.0f} ms spun between": (BURST, PAUSE, _spin),
}


def cost(
    payload: list[bytes], burst: int, pause: float, wait: Callable[[float], None] | None
) -> float:
    """µs of this thread's CPU a record while the core applies ``payload`` in bursts of
    ``burst`` records (0: all at once), ``wait(pause)`` between them (not counted)."""
    settings = Settings()
    pipeline = Pipeline(settings.policy(), MemorySessions(), clock=lambda: 1.7e9)
    applied = records(payload, settings, pipeline)
    used, more = 0.0, True
    while more:
        started = time.thread_time()
        for _ in range(burst or len(payload)):
            if next(applied, None) is None:
                more = False
                break
        used += time.thread_time() - started
        if more and wait is not None:
            wait(pause)
    return 1e6 * used / len(payload)


def measure(lines: list[dict[str, Any]], rounds: int = 4) -> dict[str, float]:
    """The best µs a record of each way, over ``rounds`` shuffled rounds."""
    payload = [orjson.dumps(line) for line in lines]
    tune_gc()  # as `stream-app replay` and the worker do
    best = dict.fromkeys(WAYS, float("inf"))
    for _ in range(rounds):
        for way in random.sample(list(WAYS), len(WAYS)):
            best[way] = min(best[way], cost(payload, *WAYS[way]))
    return best


def report(found: dict[str, float], records: int) -> str:
    flat = found["flat out"]
    lines = [f"the core, µs of CPU a record ({records:,} records, best of the rounds):"]
    for way, us in found.items():
        lines.append(f"  {way:<36} {us:6.1f}   {us / flat:.2f}x")
    return "\n".join(lines)

"""CPU of other processes, read from /proc: the workers', the broker's and the machine's.

On a shared 2-core machine a latency is only readable beside who had the cores: the
embedded broker's CPU at a steady rate grows over a run (``broker.py``), so
``bench`` records each second's CPU of the worker and of the broker next to its latency.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path


def process_cpu_seconds(pid: int) -> float:
    """User and system CPU of a process so far (/proc/<pid>/stat, fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float:
    """CPU seconds all cores have spent busy so far (/proc/stat: every state but idle and
    iowait), whoever used them: the workers, the broker, the bench's own clients and
    whatever else shares the machine."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    ticks = [int(f) for f in fields[:8]]  # user nice system idle iowait irq softirq steal
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


class CpuTimeline:
    """Cores each process used, second by second, sampled in a thread while it runs (a
    ``with`` block): ``cores[name]`` is one figure a second."""

    def __init__(self, pids: dict[str, int], every: float = 1.0) -> None:
        self.pids = pids
        self.every = every
        self.cores: dict[str, list[float]] = {name: [] for name in pids}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> CpuTimeline:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        last = {name: process_cpu_seconds(pid) for name, pid in self.pids.items()}
        while not self._stop.wait(self.every):
            for name, pid in self.pids.items():
                try:
                    now = process_cpu_seconds(pid)
                except OSError:  # gone: the run is ending
                    return
                self.cores[name].append(round((now - last[name]) / self.every, 3))
                last[name] = now


def ends(cores: list[float], seconds: int = 5) -> tuple[float, float]:
    """The mean cores of the first and of the last ``seconds`` samples."""
    if not cores:
        return 0.0, 0.0
    head, tail = cores[:seconds], cores[-seconds:]
    return sum(head) / len(head), sum(tail) / len(tail)

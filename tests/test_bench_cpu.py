"""``bench/cluster.py``'s machine figure: what the cores did, read from /proc/stat."""

from __future__ import annotations

import os
import time

from bench.cluster import machine_busy_seconds


def test_busy_seconds_count_a_spin_and_never_more_than_every_core_for_the_whole_time() -> None:
    busy, began = machine_busy_seconds(), time.monotonic()
    spun = time.process_time()
    while time.process_time() - spun < 0.3:  # a core busy for 0.3 s of CPU, not a sleep
        pass
    busy, wall = machine_busy_seconds() - busy, time.monotonic() - began
    tick = 1 / os.sysconf("SC_CLK_TCK")
    assert 0.3 - 2 * tick <= busy <= wall * (os.cpu_count() or 1) + 2 * tick

"""The worker's memory: freed memory given back, and the collector kept off the state.

A worker allocates and frees a decoded state, a turn and a record's JSON for every record.
glibc's allocator keeps what Python frees for reuse and returns it only from the top of its
heap; ``malloc_trim`` returns it; asked every ``INTERVAL`` seconds, RSS follows what the
worker holds instead of its peak. Elsewhere (another libc, macOS) there is nothing to do.

A worker runs on CPython's own allocator (pymalloc), not glibc's (``PYTHONMALLOC=malloc``,
whose free pages ``malloc_trim`` returns wherever they are): a session's state is its
entries and the decoded states go when the worker is idle, so pymalloc's arenas do not
keep the peak, and glibc's allocator would cost sustained rate (``docs/benchmarks.md``).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import time
from collections.abc import Callable

INTERVAL = 30.0  # seconds between two returns of free memory
FULL_COLLECTION_SECONDS = 600.0  # the longest frozen cycles wait under load
_full = {"at": time.monotonic()}  # when the last full collection ran (process-wide, as GC)

_trim: Callable[[int], int] | None = None  # glibc's malloc_trim: 1 if it gave memory back
with contextlib.suppress(OSError, AttributeError):  # not glibc
    _trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim


def give_back() -> bool:
    """Returns the allocator's free memory to the system; whether there was a way to."""
    if _trim is None:
        return False
    _trim(0)
    return True


def freeze_survivors() -> None:
    """Moves every object alive now out of the collector's generations (``gc.freeze``).

    A worker's state is hundreds of thousands of long-lived objects, and the collector
    walks them all again in each older-generation collection, with the event loop stopped
    for as long. The agent freezes what survives each of its steps (a run of records): a
    young collection then sees only what was made since, not everything since the last
    checkpoint (whose references into the old state cost a cache miss each), and since
    freezing restarts the young generation's count, one rarely runs at all. Refcounting
    still frees a frozen object that is no longer used; only a cycle among frozen objects
    (a record makes few) waits for ``collect_frozen``, which runs when the worker is idle
    and at least every ``FULL_COLLECTION_SECONDS``."""
    if time.monotonic() - _full["at"] > FULL_COLLECTION_SECONDS:
        collect_frozen()
    else:
        gc.freeze()


def collect_frozen() -> None:
    """Collects everything, the frozen objects too, and freezes what survives: the pause
    of a full collection, so that cycles frozen at a checkpoint do not stay for good."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    _full["at"] = time.monotonic()


def tune_gc() -> None:
    """Collect garbage less often than CPython's default, which suits small scripts.

    Session state is many long-lived objects, and Kafka clients allocate many short-lived
    ones: with the default thresholds the collector walks the state again and again. A young
    generation of 10,000 collects seldom enough for that walk to stop costing throughput,
    and keeps each collection short; a larger one only lengthens the pauses
    (``docs/benchmarks.md``).
    """
    gc.collect()
    gc.freeze()  # what start-up loaded is never garbage
    gc.set_threshold(10_000, 50, 100)

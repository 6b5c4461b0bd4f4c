"""Giving freed memory back to the operating system.

A worker allocates and frees a decoded state, a turn and a record's JSON for every record.
glibc's allocator keeps what Python frees for reuse and returns it only from the top of its
heap: after 40,000 sessions a worker's RSS was 636 MiB of which 288 MiB were free and kept
(measured with ``python -m bench --soak``). ``malloc_trim`` returns it, in milliseconds;
asked every ``INTERVAL`` seconds, RSS follows what the worker holds instead of its peak.
Elsewhere (another libc, macOS) there is nothing to do.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
from collections.abc import Callable
from typing import Any

INTERVAL = 30.0  # seconds between two returns of free memory

_trim: Callable[[int], Any] | None = None
with contextlib.suppress(OSError, AttributeError):  # not glibc
    _trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim


def give_back() -> bool:
    """Returns the allocator's free memory to the system; whether there was a way to."""
    if _trim is None:
        return False
    _trim(0)
    return True

"""Work on the event loop in slices, so that no one task holds it for long.

One event loop serves the agent, the checkpoints, the consumer's heartbeats and fetches,
the producer's acknowledgements and the web pages. A coroutine that never awaits anything
unfinished never gives the loop back: the agent reading a full buffer (``asyncio.Queue.get``
returns at once while records wait) would hold it until the buffer is empty, which is
latency for every turn and a late heartbeat. Work that may run long calls a ``Slices``
between two units of it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection

# The longest one task keeps the event loop before giving it back. The agent, the drain
# loop and a checkpoint may each use a slice in one turn of the loop, and a timer due meanwhile
# waits up to two turns: a shorter slice is less event-loop lag for a little more CPU a
# record (docs/benchmarks.md). What is let go of in bulk is let go of a slice at a time
# too (``let_go``).
SLICE_SECONDS = 0.001


class Slices:
    """Gives the event loop back once ``seconds`` of work have passed since it last did."""

    def __init__(self, seconds: float = SLICE_SECONDS) -> None:
        self.seconds = seconds
        self._since = time.perf_counter()

    async def __call__(self) -> None:
        if time.perf_counter() - self._since > self.seconds:
            await asyncio.sleep(0)
            self._since = time.perf_counter()


async def let_go(*collections: Collection[object]) -> None:
    """Empties ``collections`` an item at a time, giving the loop back every slice: freeing
    thousands of records, outputs or events in one step would hold the loop."""
    pause = Slices()
    for items in collections:
        while items:
            if isinstance(items, dict):
                items.popitem()
            elif isinstance(items, list | set):
                items.pop()
            else:
                raise TypeError(f"let_go empties lists, sets and dicts, not {type(items)}")
            await pause()

"""The worker's memory (``stream_app/allocator.py``)."""

from __future__ import annotations

import gc
import weakref

from stream_app.runtime import allocator


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_a_cycle_frozen_at_a_checkpoint_is_collected_by_the_full_collection() -> None:
    # freeze_survivors spares the collector the state at every checkpoint; a cycle that
    # was alive then is garbage no ordinary collection finds, so collect_frozen must.
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    try:
        allocator.freeze_survivors()
        assert gc.get_freeze_count() > 0
        del a, b
        gc.collect()
        assert gone() is not None  # frozen: out of the collector's reach
        allocator.collect_frozen()
        assert gone() is None
    finally:
        gc.unfreeze()

"""JSON bytes sized to their content, for values that outlive the call that made them.

orjson returns its working buffer as the ``bytes`` object without shrinking it: at least
4 KiB since orjson 3.12 (1 KiB before), whatever the length (ijl/orjson#483, closed as
intended): a 30-byte turn key keeps 4,098 bytes. A worker keeps several such values per
record in flight (keys, turn values, states, bodies, re-keyed records) until the broker
has them, and a decoded state keeps its decisions' JSON: uncopied, they would be most of
its peak memory, held in the allocator after. A copy of the right size is cheap.
"""

from __future__ import annotations

import orjson


def dumps(value: object, option: int = 0) -> bytes:
    """``orjson.dumps``, in a buffer of the value's own length."""
    return bytes(memoryview(orjson.dumps(value, option=option)))

"""JSON bytes kept by the worker are sized to their content (``core/jsonbytes.py``)."""

from __future__ import annotations

import tracemalloc

import orjson

from stream_app.core import jsonbytes


def _held_bytes_each(make: object) -> float:
    """Bytes allocated per value for 1,000 values kept alive."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [make([f"session-{i}", "call-1"]) for i in range(1_000)]  # type: ignore[operator]
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(kept) == 1_000
    return held / 1_000


def test_a_kept_value_holds_about_its_length() -> None:
    # orjson hands over its working buffer (4 KiB since 3.12, ijl/orjson#483): a turn key
    # kept 4,098 bytes. Here a 30-byte key with its bytes object and list slot stays small.
    assert _held_bytes_each(jsonbytes.dumps) < 200


def test_the_bytes_are_orjsons() -> None:
    value = {"b": [1, 2.5, None], "a": "x\u00e9\x00"}
    assert jsonbytes.dumps(value) == orjson.dumps(value)
    assert jsonbytes.dumps(value, orjson.OPT_SORT_KEYS) == orjson.dumps(
        value, option=orjson.OPT_SORT_KEYS
    )

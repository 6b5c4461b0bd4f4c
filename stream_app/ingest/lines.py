"""An input line as ``stream-app replay`` and ``stream-app publish`` read it.

Each line is ``{"topic": <an input kind's name>, "key": str|null, "value": V}`` (the kinds:
``core/inputs.py``); a string V is the raw record value, anything else is the value itself.
A line's offset is its 0-based line number.
"""

from __future__ import annotations

import orjson

from stream_app.config import Settings
from stream_app.core.inputs import INPUTS
from stream_app.core.records import SourceRecord
from stream_app.models.json_types import Json

NOT_A_KIND = "topic: must be " + " or ".join(f'"{name}"' for name in INPUTS)
# A replay line of the agents' telemetry (SPEC §10): ``{"topic": "telemetry", "value": <an
# OTLP ExportLogsServiceRequest, JSON>}``, the telemetry topic's record (no input kind: it
# makes decisions, ``cli/replay_telemetry.py``).
TELEMETRY = "telemetry"
_TELEMETRY_MARK = b'"telemetry"'


def record_value(value: Json) -> bytes:
    """A replay line's ``value`` as record bytes: a string is the raw value, else its JSON."""
    if isinstance(value, str):
        return value.encode()
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:  # nested past orjson's 255 levels: the core rejects it
        return _dumps_deep(value)


def _dumps_deep(value: Json) -> bytes:
    """JSON of a value nested deeper than orjson writes, without recursion."""
    out: list[bytes] = []
    stack: list[Json | bytes] = [value]  # JSON values, and bytes to write as they are
    while stack:
        item = stack.pop()
        if isinstance(item, bytes):
            out.append(item)
        elif isinstance(item, dict):
            out.append(b"{")
            stack.append(b"}")
            entries = list(item.items())
            for i in range(len(entries) - 1, -1, -1):
                stack.extend((entries[i][1], orjson.dumps(entries[i][0]) + b":"))
                if i:
                    stack.append(b",")
        elif isinstance(item, list):
            out.append(b"[")
            stack.append(b"]")
            for i in range(len(item) - 1, -1, -1):
                stack.append(item[i])
                if i:
                    stack.append(b",")
        else:
            out.append(orjson.dumps(item))
    return b"".join(out)


def source_record(line: bytes, offset: int, settings: Settings) -> SourceRecord | str:
    """The line as a source record, or why it is not one (``stream-app publish`` reads
    its input with this too, so both take the same lines)."""
    read = read_line(line, offset, settings)
    return read if isinstance(read, str) else read[0]


def telemetry_line(line: bytes, offset: int, settings: Settings) -> SourceRecord | None:
    """A telemetry line as the telemetry topic's record; None for any other line (looked at
    only when it names the topic at all)."""
    if _TELEMETRY_MARK not in line:
        return None
    try:
        doc = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict) or doc.get("topic") != TELEMETRY or "value" not in doc:
        return None
    key = doc.get("key")
    raw_key = key.encode() if isinstance(key, str) else None
    return SourceRecord(
        TELEMETRY, settings.topic_telemetry, 0, offset, raw_key, record_value(doc["value"])
    )


def read_line(line: bytes, offset: int, settings: Settings) -> tuple[SourceRecord, Json] | str:
    """The line's record and its value as parsed with the line (the core need not parse
    the value again: ``Pipeline.process``), or why it is not a record."""
    try:
        doc = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return f"line is not JSON: {exc}"
    if not isinstance(doc, dict) or doc.get("topic") not in INPUTS:
        return NOT_A_KIND
    key, value = doc.get("key"), doc.get("value")
    if key is not None and not isinstance(key, str):
        return "key: must be a string or null"
    if "value" not in doc:
        return "value: is required"
    raw = record_value(value)
    kind = doc["topic"]
    record = SourceRecord(
        kind, settings.topic_of(kind), 0, offset, None if key is None else key.encode(), raw
    )
    return record, value

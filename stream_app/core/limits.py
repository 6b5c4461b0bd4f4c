"""What a record may hold beyond its schema, so that nothing accepted fails later.

A value past one of these limits is a ``schema`` dead letter whose error names the field.
Each limit keeps every later step (redaction, translation, the completion text, the natural
key, state and turn serialization with orjson) within what it can do:

- **Nesting**: a record nests at most ``MAX_DEPTH`` (64) levels of objects and arrays,
  counted from the record itself (so a decision's ``raw``, a tool call's ``arguments`` and a
  tool result nest at most 63 levels inside it); tool-call ``arguments`` sent as JSON text
  nest at most 64 levels of their own. The core's own wrappers add under ten levels, far
  below orjson's 255 on output and Python's recursion limit.
- **Ids** (``conversationId``, ``eventId``, ``messageId``, tool-call ids, ``toolCallId``,
  ``decision_id``, ``session_id``, ``call_id``): at most ``MAX_ID_CHARS`` (1024)
  characters. Ids travel into keys, errors and every index of a session's state.
- **Integers** kept by the core (``sequence``, ``observation_delay_ms``): signed 64-bit,
  what orjson (and a Java consumer) can write back.
- **Instants** (a decision's ``occurred_at`` and ``captured_at``): from
  1970-01-01T00:00:00Z inclusive to 2200-01-01T00:00:00Z exclusive, after applying the
  offset, so nanoseconds since the epoch stay within signed 64-bit (which ends in 2262).
"""

from __future__ import annotations

from collections.abc import Iterable

from stream_app.models.json_types import Json
from stream_app.models.timestamps import instant_ns, is_datetime

MAX_DEPTH = 64
MAX_ID_CHARS = 1024
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
EARLIEST_INSTANT = "1970-01-01T00:00:00Z"  # inclusive
LATEST_INSTANT = "2200-01-01T00:00:00Z"  # exclusive
_EARLIEST_NS = instant_ns(EARLIEST_INSTANT)
_LATEST_NS = instant_ns(LATEST_INSTANT)
Container = dict[str, Json] | list[Json]  # what nests

# Where free-form JSON enters a record: a too-deep value is reported under these names.
_JSON_FIELDS: tuple[tuple[str | None, ...], ...] = (
    ("raw",),
    ("message", "content", None, "toolResult", "result"),
    ("message", "toolCalls", None, "arguments"),
)


class LimitExceeded(ValueError):
    """A value past a limit: ``str(exc)`` is the dead letter's error, naming the field."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


def too_deep(field: str) -> LimitExceeded:
    return LimitExceeded(field, f"is nested more than {MAX_DEPTH} levels deep")


def check_id(value: str | None, field: str) -> None:
    if value is not None and len(value) > MAX_ID_CHARS:
        raise LimitExceeded(
            field, f"is {len(value)} characters, over the {MAX_ID_CHARS}-character limit for ids"
        )


def check_int64(value: int | None, field: str) -> None:
    if value is not None and not INT64_MIN <= value <= INT64_MAX:
        raise LimitExceeded(field, "is outside the signed 64-bit integer range")


def check_instant(value: str | None, field: str) -> None:
    """``value`` is a valid date-time (the model checked its form)."""
    if value is not None and not _EARLIEST_NS <= instant_ns(value) < _LATEST_NS:
        raise LimitExceeded(
            field,
            f"{value[:40]!r} is outside the accepted range [{EARLIEST_INSTANT}, {LATEST_INSTANT})",
        )


def in_range(value: str) -> bool:
    """Whether ``value`` is a date-time (RFC 3339) within the accepted instants."""
    return is_datetime(value) and _EARLIEST_NS <= instant_ns(value) < _LATEST_NS


def _depth_exceeds(value: Container, limit: int) -> bool:
    """Whether ``value`` nests more than ``limit`` levels (iterative: any depth is safe)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def _too_deep_path(value: Container, limit: int) -> list[str | int]:
    """The path to a container nested past ``limit``; ``value`` is known to have one."""
    stack: list[tuple[Container, list[str | int]]] = [(value, [])]
    while stack:
        node, path = stack.pop()
        if len(path) >= limit:
            return path
        items: Iterable[tuple[str | int, Json]] = (
            node.items() if isinstance(node, dict) else enumerate(node)
        )
        stack.extend((c, [*path, k]) for k, c in items if isinstance(c, dict | list))
    return []  # pragma: no cover - only called on a value that has one


def _field_name(path: list[str | int]) -> str:
    """The record field a too-deep path is under: a free-JSON field, else its first steps."""
    for pattern in _JSON_FIELDS:
        head = path[: len(pattern)]
        if len(head) == len(pattern) and all(
            p == h if p is not None else isinstance(h, int)
            for p, h in zip(pattern, head, strict=True)
        ):
            return ".".join(str(h) for h in head)
    return ".".join(str(h)[:64] for h in path[:2]) or "(record)"


def shallow(text: bytes | str) -> bool:
    """Whether JSON ``text`` has at most ``MAX_DEPTH`` brackets, so nests no deeper."""
    if isinstance(text, bytes):  # one pass over the text, not one a kind of bracket
        return len(text) - len(text.translate(None, b"{[")) <= MAX_DEPTH
    return text.count("{") + text.count("[") <= MAX_DEPTH


def check_depth(value: Json, hint: bytes | str, field: str | None = None) -> None:
    """``value`` nests at most ``MAX_DEPTH`` levels; ``hint`` is the text it was parsed from.

    Fewer than ``MAX_DEPTH`` brackets in the text settle it at C speed, which is the common
    case; otherwise the value is walked. ``field`` names it, else the path does.
    """
    if not isinstance(value, dict | list):
        return
    if shallow(hint) or not _depth_exceeds(value, MAX_DEPTH):
        return
    name = field if field is not None else _field_name(_too_deep_path(value, MAX_DEPTH))
    raise too_deep(name)

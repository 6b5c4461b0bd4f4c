"""Reading turn lines: the latest revision of every turn key of a TURNS or FINAL file (or the
topic), and the sessions they form."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple, cast

import orjson
from pydantic import ValidationError

from stream_app.core.records import turn_key as worker_key
from stream_app.datasets.options import MAX_EXAMPLE_BYTES
from stream_app.datasets.skips import SkipReason, Skips
from stream_app.models.json_types import Json
from stream_app.models.turn import Turn, TurnDict

# A Turn the worker writes nests less than 64 levels of input (core/limits.py) and ten of its
# own; one deeper than this is not one of them, and orjson writes no more than 255 levels.
MAX_TURN_DEPTH = 128


_KEY_AT_START = re.compile(rb'^\s*\{\s*"key"\s*:\s*("(?:[^"\\]|\\.)*")')


@dataclass(slots=True)
class TurnLines:
    """The latest revision of every key of a TURNS or FINAL file, in first-emission order.

    ``latest`` maps a key to the line of its latest revision, kept as bytes (parsed again
    when its session is built), or to the reason it cannot be one (a line too large is not
    kept: memory stays bounded by ``max_bytes``). A dict keeps the position of a key's first
    line, so its order is the order the turns were first emitted. A turn is its parsed key,
    never the key's text: ``latest`` holds each key as the worker spells it (``known_as``).
    """

    latest: dict[str, bytes | SkipReason] = field(default_factory=dict)
    records: int = 0  # lines read, blank ones left out
    unkeyed: int = 0  # lines with no string key: not turns, of no knowable session
    max_bytes: int = MAX_EXAMPLE_BYTES
    first_bad: int | None = None  # the number (from 1) of the first line with no turn key
    lines: int = 0  # lines seen, blank ones included (for first_bad)

    def add(self, line: bytes) -> None:
        self.lines += 1
        if not line.strip():
            return
        self.records += 1
        if len(line) > self.max_bytes:
            found = _KEY_AT_START.match(line[:65536])
            key = orjson.loads(found.group(1)) if found else None
            self._keep(key, SkipReason.TOO_LARGE)
            return
        problem: SkipReason | None = None
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError:
            doc, problem = _lenient(line)
        key = doc.get("key") if isinstance(doc, dict) else None
        self._keep(key, problem if problem is not None else line)

    def add_keyed(self, key: str, line: bytes) -> None:
        """A turn line whose key is known (read from a topic): kept without parsing it."""
        self.lines += 1
        self.records += 1
        if len(line) > self.max_bytes:
            self._keep(key, SkipReason.TOO_LARGE)
        else:
            self._keep(key, line)

    def _keep(self, key: object, line: bytes | SkipReason) -> None:
        if not isinstance(key, str):
            self.unkeyed += 1
            if self.first_bad is None:
                self.first_bad = self.lines
            return
        if turn_key(key) is None and self.first_bad is None:
            self.first_bad = self.lines
        self.latest[known_as(key)] = line

    @property
    def turns(self) -> int:
        """Keys that name a turn: zero means the input holds no turn line at all."""
        return sum(1 for key in self.latest if turn_key(key) is not None)


def _lenient(line: bytes) -> tuple[Json, SkipReason | None]:
    """A line orjson refuses, read by Python's json: NaN and infinities, lone surrogates.
    Returns the document (None when it is not JSON either) and what is wrong with it."""
    found: list[str] = []

    def constant(name: str) -> None:
        found.append(name)

    try:
        doc = json.loads(line, parse_constant=constant)
    except (ValueError, RecursionError):
        return None, None
    if found:
        return cast(Json, doc), SkipReason.NON_FINITE_NUMBER
    return cast(Json, doc), SkipReason.UNREPRESENTABLE_UNICODE


def read_turn_lines(lines: Iterable[bytes]) -> TurnLines:
    read = TurnLines()
    for line in lines:
        read.add(line)
    return read


def turn_key(key: str) -> tuple[str, str] | None:
    """The (session_id, inference_call_id) a turn key names, or None when it names none."""
    try:
        pair = orjson.loads(key)
    except (orjson.JSONDecodeError, UnicodeEncodeError, TypeError):
        return None  # (TypeError: orjson refuses a str with a lone surrogate)
    if isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair):
        return pair[0], pair[1]
    return None


def known_as(key: str) -> str:
    """The key a turn is known by: one that names a turn (the JSON text of ``[session_id,
    inference_call_id]``, however spaced or escaped) as the worker writes it; any other as it
    is, which no turn's can equal (the worker's spelling of a pair is always a pair)."""
    pair = turn_key(key)
    if pair is None:
        return key
    try:
        return worker_key(*pair).decode()
    except (UnicodeEncodeError, TypeError):
        return key


def completing_index(turn: TurnDict) -> int | None:
    """The index of the turn's own assistant message: the one with a finish reason (the
    core emits a turn when such a message arrives, so there is exactly one)."""
    found = [
        i
        for i, m in enumerate(turn["new_messages"])
        if m["role"] == "assistant" and m["finish_reason"] is not None
    ]
    return found[0] if len(found) == 1 else None


def _deeper_than(value: Json, limit: int) -> bool:
    """Whether ``value`` nests more than ``limit`` levels (iterative: any depth is safe)."""
    stack: list[tuple[Json, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth >= limit:
                return True
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return False


def _unrepresentable(text: str) -> bool:
    if "\x00" in text:
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _ids(session_id: str, turn: TurnDict) -> Iterator[str]:
    yield session_id
    yield turn["inference_call_id"]
    for m in turn["new_messages"]:
        for part in m["parts"]:
            if part["type"] in ("tool_call", "tool_call_response"):
                yield part["id"]
    for d in turn["decisions"]:
        yield d["decision_id"]
        yield d["session_id"]


def parse_turn(
    line: bytes | SkipReason, call_id: str, session_id: str = ""
) -> TurnDict | SkipReason:
    """The Turn of a turn line whose key names ``call_id``, or why it holds none."""
    if isinstance(line, SkipReason):
        return line
    brackets = len(line) - len(line.translate(None, b"{["))
    if brackets > MAX_TURN_DEPTH and _deeper_than(orjson.loads(line), MAX_TURN_DEPTH + 1):
        return SkipReason.NOT_A_TURN  # (the line's own object is one level)
    try:
        value = orjson.loads(line).get("value")
        Turn.model_validate(value)
    except (orjson.JSONDecodeError, ValidationError):
        return SkipReason.NOT_A_TURN
    turn = cast(TurnDict, value)
    if turn["inference_call_id"] != call_id or completing_index(turn) is None:
        return SkipReason.NOT_A_TURN
    if any(m["role"] not in ("system", "user", "assistant", "tool") for m in turn["new_messages"]):
        return SkipReason.NOT_A_TURN
    if any(_unrepresentable(i) for i in _ids(session_id, turn)):
        return SkipReason.UNREPRESENTABLE_UNICODE
    return turn


class SessionTurn(NamedTuple):
    key: str
    turn: TurnDict | SkipReason  # a reason: the line is not a turn this export can use


def sessions(read: TurnLines, skips: Skips) -> Iterator[tuple[str, list[SessionTurn]]]:
    """Each session with its turns in first-emission order, sessions in the order of their
    first turn. A line whose key names no session is skipped here."""
    for _ in range(read.unkeyed):
        skips.add(None, SkipReason.NOT_A_TURN)
    grouped: dict[str, list[tuple[str, str, bytes | SkipReason]]] = {}
    for key, line in read.latest.items():
        pair = turn_key(key)
        if pair is None:
            skips.add(key, line if isinstance(line, SkipReason) else SkipReason.NOT_A_TURN)
            continue
        grouped.setdefault(pair[0], []).append((key, pair[1], line))
    for session_id, entries in grouped.items():
        yield (
            session_id,
            [SessionTurn(key, parse_turn(line, call, session_id)) for key, call, line in entries],
        )

"""Datasets (SPEC §9): Turn records as what trainers load, as pure functions.

The input is the latest revision of every turn, in the order the turns were first emitted: a
TURNS or FINAL file (``stream-app replay``'s), or the final topic read by ``stream-app
export``. Five formats come out of it, one record at a time with the key it is split by:

- ``turns``: the ``{"key", "value"}`` lines themselves;
- ``chat``: supervised examples in which each assistant message is a training target once
  (OpenAI: one example per turn, earlier assistant messages ``weight: 0``; TRL: one row per
  session, as TRL's loss covers every assistant message of a row);
- ``trajectories``: one line per session, ``{"session_id", "org_id", "turns"}``;
- ``kto``: one row per turn with a verdict, TRL's unpaired preference rows;
- ``dpo``: an accepted and a rejected turn of one prompt, TRL's (or OpenAI's) preference rows.

A turn the format cannot write faithfully is skipped with a reason of the format's closed
list (:data:`SKIPS`) and counted, never written wrong. The history rule: a session's
messages, in the order of its turns, must form a conversation the chat format can hold. Every
tool call of an assistant message is answered by a tool message before the next message of
another role, and every tool message answers such a call. A tool result whose call no earlier
message of the session makes is the trace of a missing earlier turn; a missing turn that no
tool loop crosses cannot be noticed from the turns alone.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal, NamedTuple, NotRequired, TypedDict, cast

import orjson
from pydantic import ValidationError

from stream_app.core.records import turn_key as worker_key
from stream_app.core.redaction import REDACTED, redact
from stream_app.core.tenant import normalize_org
from stream_app.models.json_types import Json
from stream_app.models.turn import InferenceMessageDict, Turn, TurnDict

Format = Literal["turns", "chat", "trajectories", "kto", "dpo"]
FORMATS: tuple[Format, ...] = ("turns", "chat", "trajectories", "kto", "dpo")
Profile = Literal["openai", "trl"]
PROFILES: tuple[Profile, ...] = ("openai", "trl")
Split = Literal["all", "train", "eval"]
MAX_LISTED = 1_000  # skipped turns the manifest names one by one (the counts are complete)
MAX_EXAMPLE_BYTES = 16 * 1024 * 1024  # --max-example-bytes' default
MAX_PAIRS = 3  # dpo: pairs written per prompt
# A Turn the worker writes nests less than 64 levels of input (core/limits.py) and ten of its
# own; one deeper than this is not one of them, and orjson writes no more than 255 levels.
MAX_TURN_DEPTH = 128


class SkipReason(StrEnum):
    """Why a turn was not written. Each format counts by its own closed list (:data:`SKIPS`)."""

    # The record is not a turn line: not JSON, no key, a key that is not the JSON text of
    # [session_id, inference_call_id] naming the value's call, a value that is not a Turn v1
    # or whose messages hold no single assistant message with a finish reason.
    NOT_A_TURN = "not_a_turn"
    # An id (the key's, a tool call's, a decision's) with NUL or a lone surrogate: no
    # dataset file or trainer's tokenizer holds it as it is.
    UNREPRESENTABLE_UNICODE = "unrepresentable_unicode"
    # NaN or an infinity, which JSON does not have (a line written by Python's json).
    NON_FINITE_NUMBER = "non_finite_number"
    # The line, or the example written of it, is larger than --max-example-bytes.
    TOO_LARGE = "too_large"
    # A tool result answers a tool call that no earlier message of its session makes: the
    # turn that made the call is not in the input.
    MISSING_EARLIER_TURN = "missing_earlier_turn"
    # A conversation the chat format cannot hold: a tool call not answered before the next
    # message of another role, a call answered twice, a tool message that answers no call,
    # or tool calls (or tool results) in a message whose role cannot carry them.
    BROKEN_TOOL_LOOP = "broken_tool_loop"
    # Another turn of its session was skipped for one of the reasons above: an earlier one,
    # whose messages this turn's history needs (trajectories: any).
    SESSION_BROKEN = "session_broken"
    # chat --only-accepted: the turn has no explicit accept, or has a reject.
    NOT_ACCEPTED = "not_accepted"
    # kto, dpo: no explicit decision (implicit ones count only with --include-implicit).
    NO_VERDICT = "no_verdict"
    # kto, dpo: an accept and a reject of the same kind (explicit, or implicit alone).
    CONFLICTING_VERDICTS = "conflicting_verdicts"
    # dpo: no turn of the other verdict shares its prompt.
    UNPAIRED = "unpaired"
    # dpo: its only counterparts answered exactly as it did.
    IDENTICAL_RESPONSES = "identical_responses"
    # dpo: its prompt already has MAX_PAIRS pairs.
    PAIR_LIMIT = "pair_limit"


_R = SkipReason
_READ = (_R.NOT_A_TURN, _R.UNREPRESENTABLE_UNICODE, _R.NON_FINITE_NUMBER, _R.TOO_LARGE)
_HISTORY = (*_READ, _R.MISSING_EARLIER_TURN, _R.BROKEN_TOOL_LOOP, _R.SESSION_BROKEN)
_VERDICT = (_R.NO_VERDICT, _R.CONFLICTING_VERDICTS)
SKIPS: dict[Format, tuple[SkipReason, ...]] = {
    "turns": _READ,
    "trajectories": _HISTORY,
    "chat": (*_HISTORY, _R.NOT_ACCEPTED),
    "kto": (*_HISTORY, *_VERDICT),
    "dpo": (*_HISTORY, *_VERDICT, _R.UNPAIRED, _R.IDENTICAL_RESPONSES, _R.PAIR_LIMIT),
}
# Reasons a turn is skipped for what it is, named one by one in the manifest.
_NAMED = {*_READ, _R.MISSING_EARLIER_TURN, _R.BROKEN_TOOL_LOOP}


class ChatFunction(TypedDict):
    name: str
    arguments: Json  # openai: the arguments' JSON text; trl: the arguments object


class ChatToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: ChatFunction


class ChatMessage(TypedDict):
    role: Literal["system", "user", "assistant", "tool"]
    content: str
    reasoning_content: NotRequired[str]  # with --reasoning, when the message has reasoning
    tool_calls: NotRequired[list[ChatToolCall]]  # assistant messages that call tools
    tool_call_id: NotRequired[str]  # tool messages: the call answered
    weight: NotRequired[int]  # openai chat, assistant messages: 1 the target, 0 history


class ToolFunction(TypedDict):
    name: str
    parameters: Json  # {"type": "object"}: a Turn names a tool, not its schema


class Tool(TypedDict):
    type: Literal["function"]
    function: ToolFunction


class ExampleMetadata(TypedDict):
    session_id: str
    inference_call_id: str
    agent_harness: str | None  # of the turn's first decision; None without decisions
    accepted_explicit: int  # the turn's explicit decisions with accepted: true
    rejected_explicit: int  # ... explicit, accepted: false
    accepted_implicit: int  # ... implicit (a config, a hook, retention), accepted: true
    rejected_implicit: int  # ... implicit, accepted: false
    retention_score: float | None  # the latest edit_retention_score observed, if any


class ChatExample(TypedDict):
    messages: list[ChatMessage]
    tools: NotRequired[list[Tool]]  # the functions the example's messages call


class KtoRow(TypedDict):
    prompt: list[ChatMessage]
    completion: list[ChatMessage]
    label: bool


class DpoRow(TypedDict):
    prompt: list[ChatMessage]
    chosen: list[ChatMessage]
    rejected: list[ChatMessage]


class OpenAIPreferenceInput(TypedDict):
    messages: list[ChatMessage]
    tools: NotRequired[list[Tool]]


class OpenAIPreference(TypedDict):
    input: OpenAIPreferenceInput
    preferred_output: list[ChatMessage]
    non_preferred_output: list[ChatMessage]


class Trajectory(TypedDict):
    session_id: str
    org_id: str
    turns: list[TurnDict]


class TurnsLine(TypedDict):
    key: str
    value: TurnDict


Record = TurnsLine | ChatExample | Trajectory | KtoRow | DpoRow | OpenAIPreference


class Item(NamedTuple):
    """A record, the key its split is drawn by (a session, or a prompt's hash for kto and
    dpo, so that a prompt lives in one split), the hash of the prompt it trains on (chat:
    the messages before its first target), and its metadata line (None: no sidecar)."""

    split_key: str
    record: Record
    prompt: str | None
    metadata: dict[str, Any] | None
    keys: tuple[str, ...]  # the turn keys written in it


class SkippedTurn(TypedDict):
    key: str | None  # None: the record had no readable key
    reason: SkipReason


@dataclass(frozen=True, slots=True)
class Options:
    format: Format = "turns"
    reasoning: bool = False  # chat: keep reasoning parts as reasoning_content
    only_accepted: bool = False  # chat: only turns a developer explicitly accepted
    eval_fraction: float | None = None  # None: one file, no split
    org_id: str = "default"  # trajectories of sessions whose turns carry no decision
    profile: Profile | None = None  # None: openai for chat, trl for kto and dpo
    include_implicit: bool = False  # kto, dpo: implicit decisions as verdicts too
    keep_credentials: bool = False  # False: content redacted as the worker redacts
    max_example_bytes: int = MAX_EXAMPLE_BYTES
    split_salt: str = ""  # "": the split of SPEC §9 (a hash of the key alone)

    @property
    def chosen_profile(self) -> Profile:
        if self.profile is not None:
            return self.profile
        return "openai" if self.format == "chat" else "trl"


@dataclass(slots=True)
class Skips:
    """Skipped turns: counted by reason, and the first ``MAX_LISTED`` of them named (those
    skipped for what they are, not for a filter or a sibling)."""

    counts: Counter[SkipReason] = field(default_factory=Counter)
    listed: list[SkippedTurn] = field(default_factory=list)
    redacted: int = 0  # credentials replaced in what was written (REDACTED markers added)

    def add(self, key: str | None, reason: SkipReason) -> None:
        self.counts[reason] += 1
        if reason in _NAMED and len(self.listed) < MAX_LISTED:
            if key is not None:  # a lone surrogate named as its escape: the manifest is UTF-8
                key = key.encode("utf-8", "backslashreplace").decode("utf-8")
            self.listed.append({"key": key, "reason": reason})

    def as_counts(self, form: Format = "chat") -> dict[str, int]:
        """Every reason of the format's closed list, in its order, with its count (0 too)."""
        return {reason.value: self.counts[reason] for reason in SKIPS[form]}


# --- Reading turn lines -------------------------------------------------------------------

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


def _completing(turn: TurnDict) -> int | None:
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
    if turn["inference_call_id"] != call_id or _completing(turn) is None:
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


# --- Content: redaction, timestamps -------------------------------------------------------


def redacted(turn: TurnDict, skips: Skips) -> TurnDict:
    """The turn with credentials in its messages cut out by the worker's redaction; counts
    the markers it added."""
    before = orjson.dumps(turn["new_messages"])
    messages = cast(list[InferenceMessageDict], redact(cast(Json, turn["new_messages"])))
    after = orjson.dumps(messages)
    if after == before:
        return turn
    marker = orjson.dumps(REDACTED)[1:-1]
    skips.redacted += after.count(marker) - before.count(marker)
    return {**turn, "new_messages": messages}


def rfc3339(instant: str | None) -> str | None:
    """An instant as RFC 3339 in UTC with microseconds: one spelling, one type in a loader."""
    if instant is None:
        return None
    try:
        parsed = datetime.fromisoformat(instant.replace("Z", "+00:00"))
    except ValueError:
        return instant
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _timestamped(turn: TurnDict) -> TurnDict:
    decisions = [
        {**d, "occurred_at": rfc3339(d["occurred_at"]), "captured_at": rfc3339(d["captured_at"])}
        for d in turn["decisions"]
    ]
    return cast(TurnDict, {**turn, "decisions": decisions})


# --- Chat messages ------------------------------------------------------------------------


def _as_text(result: Json) -> str:
    return result if isinstance(result, str) else orjson.dumps(result).decode()


def chat_messages(message: InferenceMessageDict, reasoning: bool) -> tuple[list[ChatMessage], bool]:
    """The chat messages of one InferenceMessage, and whether the chat format can hold it.

    Each tool result becomes a ``tool`` message, before the rest of its message (a result
    must follow the call it answers); text parts are joined with newlines, as the
    completion joins them; each tool call becomes an entry of ``tool_calls``, its arguments
    an object (:func:`profiled` makes them text for OpenAI).
    """
    role = message["role"]
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[ChatToolCall] = []
    out: list[ChatMessage] = []
    for part in message["parts"]:
        if part["type"] == "text":
            texts.append(part["content"])
        elif part["type"] == "reasoning":
            thoughts.append(part["content"])
        elif part["type"] == "tool_call":
            function: ChatFunction = {"name": part["name"], "arguments": part["arguments"]}
            calls.append({"id": part["id"], "type": "function", "function": function})
        else:
            out.append(
                {"role": "tool", "content": _as_text(part["result"]), "tool_call_id": part["id"]}
            )
    holds = not (calls and role != "assistant") and not (out and role == "assistant")
    if role == "tool":
        return out, holds and bool(out) and not texts  # a tool message answers a call
    if texts or calls or thoughts or not out:
        chat: ChatMessage = {"role": role, "content": "\n".join(t for t in texts if t)}
        if reasoning and thoughts:
            chat["reasoning_content"] = "\n".join(t for t in thoughts if t)
        if calls:
            chat["tool_calls"] = calls
        out.append(chat)
    return out, holds


def profiled(message: ChatMessage, profile: Profile, weight: int | None = None) -> ChatMessage:
    """A message in a profile's encoding: OpenAI's arguments as JSON text (and ``weight`` on
    its assistant messages when given), TRL's as objects."""
    out = message
    if profile == "openai" and "tool_calls" in message:
        calls: list[ChatToolCall] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {
                    "name": c["function"]["name"],
                    "arguments": orjson.dumps(c["function"]["arguments"]).decode(),
                },
            }
            for c in message["tool_calls"]
        ]
        out = {**message, "tool_calls": calls}
    if weight is not None and message["role"] == "assistant":
        out = {**out, "weight": weight}
    return out


def tools_of(messages: Iterable[ChatMessage]) -> list[Tool]:
    """The functions called in ``messages``, in the order first called. A Turn names a tool,
    never its schema: the parameters say only that they are an object."""
    names = dict.fromkeys(c["function"]["name"] for m in messages for c in m.get("tool_calls", ()))
    return [
        {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
        for n in names
    ]


@dataclass(slots=True)
class ToolLoop:
    """The tool calls of a conversation read in order: which are waiting for their result."""

    waiting: set[str] = field(default_factory=set)
    called: set[str] = field(default_factory=set)

    def add(self, message: ChatMessage) -> SkipReason | None:
        """None when ``message`` may come next, else why the conversation breaks here."""
        if message["role"] == "tool":
            call = message.get("tool_call_id")
            if call is not None and call in self.waiting:
                self.waiting.discard(call)
                return None
            if call is not None and call not in self.called:
                return SkipReason.MISSING_EARLIER_TURN
            return SkipReason.BROKEN_TOOL_LOOP
        if self.waiting:  # the conversation goes on while a call has no result
            return SkipReason.BROKEN_TOOL_LOOP
        ids = [call["id"] for call in message.get("tool_calls", ())]
        if len(set(ids)) < len(ids):  # two calls of one message share an id: unanswerable
            return SkipReason.BROKEN_TOOL_LOOP
        self.waiting = set(ids)
        self.called.update(ids)
        return None

    def extend(self, messages: Iterable[ChatMessage]) -> SkipReason | None:
        for message in messages:
            if (problem := self.add(message)) is not None:
                return problem
        return None


def _mapped(
    messages: Iterable[InferenceMessageDict], reasoning: bool
) -> tuple[list[ChatMessage], bool]:
    out: list[ChatMessage] = []
    holds = True
    for message in messages:
        chat, ok = chat_messages(message, reasoning)
        out.extend(chat)
        holds = holds and ok
    return out, holds


# --- Verdicts -----------------------------------------------------------------------------


def metadata(session_id: str, turn: TurnDict) -> ExampleMetadata:
    decisions = turn["decisions"]
    scores = [
        (d["occurred_at"], d["edit_retention_score"])
        for d in decisions
        if d["edit_retention_score"] is not None
    ]
    return {
        "session_id": session_id,
        "inference_call_id": turn["inference_call_id"],
        "agent_harness": decisions[0]["agent_harness"] if decisions else None,
        "accepted_explicit": sum(1 for d in decisions if d["accepted"] and d["explicit"]),
        "rejected_explicit": sum(1 for d in decisions if not d["accepted"] and d["explicit"]),
        "accepted_implicit": sum(1 for d in decisions if d["accepted"] and not d["explicit"]),
        "rejected_implicit": sum(1 for d in decisions if not d["accepted"] and not d["explicit"]),
        "retention_score": max(scores)[1] if scores else None,
    }


def accepted(turn: TurnDict) -> bool:
    """At least one explicit accepted decision, and no rejected one (SPEC §9)."""
    decisions = turn["decisions"]
    return any(d["accepted"] and d["explicit"] for d in decisions) and all(
        d["accepted"] for d in decisions
    )


def verdict(turn: TurnDict, include_implicit: bool) -> bool | SkipReason:
    """The turn's label: its explicit decisions' (implicit ones, with ``include_implicit``,
    only when it has no explicit one), or why it has none."""
    explicit = {d["accepted"] for d in turn["decisions"] if d["explicit"]}
    implicit = {d["accepted"] for d in turn["decisions"] if not d["explicit"]}
    pool = explicit or (implicit if include_implicit else set())
    if not pool:
        return SkipReason.NO_VERDICT
    if len(pool) > 1:
        return SkipReason.CONFLICTING_VERDICTS
    return pool.pop()


# --- The conversation of a session --------------------------------------------------------


class TurnStep(NamedTuple):
    """A turn whose history could be rebuilt: the messages before its assistant message
    (the session's history, then the turn's own) and that message."""

    key: str
    turn: TurnDict
    before: list[ChatMessage]
    completion: ChatMessage


def conversation(
    session_id: str, turns: list[SessionTurn], options: Options, skips: Skips
) -> Iterator[TurnStep]:
    """The session's turns whose history can be rebuilt, in order. A message a turn holds
    after its assistant message (a later ``sequence`` that arrived first) opens the next
    turn's part of the history. Once a turn breaks the history, every later turn of the
    session is skipped too. ``before`` is shared: a consumer copies what it keeps."""
    history: list[ChatMessage] = []
    loop = ToolLoop()
    problem: SkipReason | None = None  # a break the next turn meets in its history
    broken = False
    for key, parsed in turns:
        if broken:
            skips.add(key, SkipReason.SESSION_BROKEN)
            continue
        if isinstance(parsed, SkipReason) or problem is not None:
            skips.add(key, parsed if isinstance(parsed, SkipReason) else cast(SkipReason, problem))
            broken = True
            continue
        turn = parsed if options.keep_credentials else redacted(parsed, skips)
        end = cast(int, _completing(turn)) + 1
        head, head_holds = _mapped(turn["new_messages"][:end], options.reasoning)
        problem = loop.extend(head) if head_holds else SkipReason.BROKEN_TOOL_LOOP
        if problem is not None:
            skips.add(key, problem)
            broken = True
            continue
        history.extend(head[:-1])
        yield TurnStep(key, turn, history, head[-1])
        history.append(head[-1])
        tail, tail_holds = _mapped(turn["new_messages"][end:], options.reasoning)
        problem = loop.extend(tail) if tail_holds else SkipReason.BROKEN_TOOL_LOOP
        history.extend(tail)


def prompt_hash(prompt: list[ChatMessage]) -> str:
    """The identity of a prompt: its messages compared as structures (keys in any order)."""
    return hashlib.sha256(orjson.dumps(prompt, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _response(message: ChatMessage) -> bytes:
    """What an answer says, its tool call ids left out: two retries that call the same tool
    with the same arguments answered alike."""
    calls = [c["function"] for c in message.get("tool_calls", ())]
    return orjson.dumps([message["content"], calls], option=orjson.OPT_SORT_KEYS)


# --- Chat ---------------------------------------------------------------------------------


def chat_examples(
    session_id: str, turns: list[SessionTurn], options: Options, skips: Skips
) -> Iterator[Item]:
    """The session's chat examples, each assistant message a target once.

    OpenAI: one example per turn, its own message ``weight: 1`` and every earlier assistant
    message ``weight: 0``. TRL, whose loss covers every assistant message of a row: one row
    per session, its messages up to its last turn (with ``--only-accepted``, up to the last
    turn before the first one not accepted: the later ones are skipped ``not_accepted``).
    """
    profile = options.chosen_profile
    if profile == "openai":
        for step in conversation(session_id, turns, options, skips):
            if options.only_accepted and not accepted(step.turn):
                skips.add(step.key, SkipReason.NOT_ACCEPTED)
                continue
            messages = [profiled(m, profile, 0) for m in step.before]
            messages.append(profiled(step.completion, profile, 1))
            example: ChatExample = {"messages": messages}
            if tools := tools_of(messages):
                example["tools"] = tools
            meta = metadata(session_id, step.turn)
            yield Item(session_id, example, prompt_hash(step.before), dict(meta), (step.key,))
        return
    kept: list[ExampleMetadata] = []
    keys: list[str] = []
    last: list[ChatMessage] = []
    first_prompt: str | None = None
    stopped = False
    for step in conversation(session_id, turns, options, skips):
        if stopped or (options.only_accepted and not accepted(step.turn)):
            skips.add(step.key, SkipReason.NOT_ACCEPTED)
            stopped = True
            continue
        if first_prompt is None:
            first_prompt = prompt_hash(step.before)
        last = [*step.before, step.completion]
        kept.append(metadata(session_id, step.turn))
        keys.append(step.key)
    if kept:
        row: ChatExample = {"messages": last, "tools": tools_of(last)}
        session_meta = {"session_id": session_id, "turns": kept}
        yield Item(session_id, row, first_prompt, session_meta, tuple(keys))


# --- Preferences --------------------------------------------------------------------------


def kto_rows(
    session_id: str, turns: list[SessionTurn], options: Options, skips: Skips
) -> Iterator[Item]:
    """One row per turn with a verdict: TRL's unpaired preference format, conversational."""
    for step in conversation(session_id, turns, options, skips):
        label = verdict(step.turn, options.include_implicit)
        if isinstance(label, SkipReason):
            skips.add(step.key, label)
            continue
        prompt = list(step.before)
        row: KtoRow = {"prompt": prompt, "completion": [step.completion], "label": label}
        key = prompt_hash(prompt)
        meta = {**metadata(session_id, step.turn), "prompt_sha256": key}
        yield Item(key, row, key, meta, (step.key,))


@dataclass(slots=True)
class _Prompt:
    prompt: list[ChatMessage]
    chosen: list[tuple[str, ChatMessage, ExampleMetadata]] = field(default_factory=list)
    rejected: list[tuple[str, ChatMessage, ExampleMetadata]] = field(default_factory=list)


def dpo_rows(read: TurnLines, options: Options, skips: Skips) -> Iterator[Item]:
    """Pairs of an accepted and a rejected turn with one prompt, at most ``MAX_PAIRS`` a
    prompt, in the order the prompts were first met. Holds every turn with a verdict until
    the input is read: a prompt's turns may be anywhere in it."""
    prompts: dict[str, _Prompt] = {}
    for session_id, turns in sessions(read, skips):
        for step in conversation(session_id, turns, options, skips):
            label = verdict(step.turn, options.include_implicit)
            if isinstance(label, SkipReason):
                skips.add(step.key, label)
                continue
            key = prompt_hash(step.before)
            entry = prompts.setdefault(key, _Prompt(list(step.before)))
            side = entry.chosen if label else entry.rejected
            side.append((step.key, step.completion, metadata(session_id, step.turn)))
    profile = options.chosen_profile
    for key, entry in prompts.items():
        used: set[int] = set()
        identical: set[int] = set()
        pairs = 0
        chosen_left: list[str] = []
        for ck, chosen, cmeta in entry.chosen:
            partner = None
            for j, (_, rejected, _) in enumerate(entry.rejected):
                if j in used:
                    continue
                if _response(rejected) == _response(chosen):
                    identical.add(j)
                    continue
                partner = j
                break
            if partner is None or pairs >= MAX_PAIRS:
                same = any(_response(r) == _response(chosen) for _, r, _ in entry.rejected)
                reason = (
                    SkipReason.PAIR_LIMIT
                    if pairs >= MAX_PAIRS and partner is not None
                    else SkipReason.IDENTICAL_RESPONSES
                    if same
                    else SkipReason.UNPAIRED
                )
                skips.add(ck, reason)
                chosen_left.append(ck)
                continue
            used.add(partner)
            pairs += 1
            rk, rejected, rmeta = entry.rejected[partner]
            meta = {"prompt_sha256": key, "chosen": cmeta, "rejected": rmeta}
            yield Item(key, _pair(entry.prompt, chosen, rejected, profile), key, meta, (ck, rk))
        for j, (rk, _, _) in enumerate(entry.rejected):
            if j not in used:
                reason = (
                    SkipReason.PAIR_LIMIT
                    if pairs >= MAX_PAIRS
                    else SkipReason.IDENTICAL_RESPONSES
                    if j in identical
                    else SkipReason.UNPAIRED
                )
                skips.add(rk, reason)


def _pair(
    prompt: list[ChatMessage], chosen: ChatMessage, rejected: ChatMessage, profile: Profile
) -> DpoRow | OpenAIPreference:
    if profile == "trl":
        return {"prompt": prompt, "chosen": [chosen], "rejected": [rejected]}
    messages = [profiled(m, profile) for m in prompt]
    given: OpenAIPreferenceInput = {"messages": messages}
    if tools := tools_of([*messages, chosen, rejected]):
        given["tools"] = tools
    return {
        "input": given,
        "preferred_output": [profiled(chosen, profile)],
        "non_preferred_output": [profiled(rejected, profile)],
    }


# --- Trajectories and turns ---------------------------------------------------------------


def _session_problem(turns: list[SessionTurn]) -> tuple[int, SkipReason] | None:
    """The first turn of a session that breaks its conversation, and why; None when none."""
    loop = ToolLoop()
    for i, (_, turn) in enumerate(turns):
        if isinstance(turn, SkipReason):
            return i, turn
        chat, holds = _mapped(turn["new_messages"], False)
        problem = loop.extend(chat) if holds else SkipReason.BROKEN_TOOL_LOOP
        if problem is not None:
            return i, problem
    return None


def trajectory(
    session_id: str, turns: list[SessionTurn], options: Options, skips: Skips
) -> Trajectory | None:
    """The session as one trajectory, or None (its turns counted skipped) when a turn of it
    cannot be written or breaks its conversation. Instants in RFC 3339 UTC, microseconds."""
    found = _session_problem(turns)
    if found is not None:
        at, reason = found
        for i, (key, _) in enumerate(turns):
            skips.add(key, reason if i == at else SkipReason.SESSION_BROKEN)
        return None
    kept = [cast(TurnDict, turn) for _, turn in turns]
    if not options.keep_credentials:
        kept = [redacted(turn, skips) for turn in kept]
    kept = [_timestamped(turn) for turn in kept]
    orgs = (d["org_id"] for turn in kept for d in turn["decisions"])
    org_id = next(orgs, None) or normalize_org(options.org_id)
    return {"session_id": session_id, "org_id": org_id, "turns": kept}


def turns_lines(read: TurnLines, options: Options, skips: Skips) -> Iterator[Item]:
    """The turn lines as they are (their content redacted unless ``keep_credentials``), by
    session (in the order of its first turn), then in first-emission order."""
    for session_id, turns in sessions(read, skips):
        for key, turn in turns:
            if isinstance(turn, SkipReason):
                skips.add(key, turn)
                continue
            value = turn if options.keep_credentials else redacted(turn, skips)
            yield Item(session_id, {"key": key, "value": value}, None, None, (key,))


def records(read: TurnLines, options: Options, skips: Skips) -> Iterator[Item]:
    """Every record of ``options.format``, with what it is split by, in order."""
    if options.format == "turns":
        yield from turns_lines(read, options, skips)
        return
    if options.format == "dpo":
        yield from dpo_rows(read, options, skips)
        return
    for session_id, turns in sessions(read, skips):
        if options.format == "chat":
            yield from chat_examples(session_id, turns, options, skips)
        elif options.format == "kto":
            yield from kto_rows(session_id, turns, options, skips)
        elif (line := trajectory(session_id, turns, options, skips)) is not None:
            keys = tuple(key for key, _ in turns)
            yield Item(session_id, line, None, None, keys)


# --- Split --------------------------------------------------------------------------------


def split_of(split_key: str, eval_fraction: float | None, salt: str = "") -> Split:
    """``eval`` for a key whose hash falls below the fraction, else ``train``: the first 8
    bytes of the SHA-256 of the UTF-8 key (after ``salt`` and a NUL, when there is a salt),
    big-endian, over 2**64. The same key always lands on the same side, whatever else the
    input holds; another salt draws another split."""
    if eval_fraction is None:
        return "all"
    data = split_key.encode("utf-8", "surrogatepass")
    if salt:
        data = salt.encode("utf-8", "surrogatepass") + b"\0" + data
    digest = hashlib.sha256(data).digest()
    return "eval" if int.from_bytes(digest[:8], "big") / 2**64 < eval_fraction else "train"

"""Datasets (SPEC §9): Turn records as what trainers load, as pure functions.

The input is the latest revision of every turn, in the order the turns were first emitted: a
TURNS or FINAL file (``stream-app replay``'s), or what ``stream-app export`` read from a topic,
written in that form. Three formats come out of it, one record at a time with its session:

- ``turns``: the ``{"key", "value"}`` lines themselves;
- ``chat``: one example per turn, ``{"messages", "metadata"}``, the messages being the
  session's history up to and including the turn's assistant message;
- ``trajectories``: one line per session, ``{"session_id", "org_id", "turns"}``.

A turn the format cannot write faithfully is skipped with a reason of :class:`SkipReason`
and counted, never written wrong. The history rule: a session's messages, in the order of
its turns, must form a conversation the chat format can hold. Every tool call of an
assistant message is answered by a tool message before the next message of another role,
and every tool message answers such a call. A tool result whose call no earlier message of
the session makes is the trace of a missing earlier turn. A turn missing from the input
that leaves no such trace (no tool loop crosses it) cannot be noticed from the turns alone.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal, NamedTuple, NotRequired, TypedDict, cast

import orjson
from pydantic import ValidationError

from stream_app.core.records import turn_key as worker_key
from stream_app.core.tenant import normalize_org
from stream_app.models.json_types import Json
from stream_app.models.turn import InferenceMessageDict, Turn, TurnDict

Format = Literal["turns", "chat", "trajectories"]
FORMATS: tuple[Format, ...] = ("turns", "chat", "trajectories")
Split = Literal["all", "train", "eval"]
MAX_LISTED = 1_000  # skipped turns the manifest names one by one (the counts are complete)
# A Turn the worker writes nests less than 64 levels of input (core/limits.py) and ten of its
# own; one deeper than this is not one of them, and orjson writes no more than 255 levels.
MAX_TURN_DEPTH = 128


class SkipReason(StrEnum):
    """Why a turn was not written: the closed list the manifest counts by."""

    # The record is not a turn line: not JSON, no key, a key that is not the JSON text of
    # [session_id, inference_call_id] naming the value's call, a value that is not a Turn v1
    # or whose messages hold no single assistant message with a finish reason.
    NOT_A_TURN = "not_a_turn"
    # A tool result answers a tool call that no earlier message of its session makes: the
    # turn that made the call is not in the input.
    MISSING_EARLIER_TURN = "missing_earlier_turn"
    # A conversation the chat format cannot hold: a tool call not answered before the next
    # message of another role, a call answered twice, a tool message that answers no call,
    # or tool calls (or tool results) in a message whose role cannot carry them.
    BROKEN_TOOL_LOOP = "broken_tool_loop"
    # Another turn of its session was skipped for one of the reasons above: (chat) an
    # earlier one, whose messages this turn's history needs; (trajectories) any, as a
    # session is written whole or not at all.
    SESSION_BROKEN = "session_broken"
    # --only-accepted: the turn has no explicit accepted decision, or a rejected one.
    NOT_ACCEPTED = "not_accepted"


class ChatFunction(TypedDict):
    name: str
    arguments: str  # the tool call's arguments as JSON text


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


class ExampleMetadata(TypedDict):
    session_id: str
    inference_call_id: str
    agent_harness: str | None  # of the turn's first decision; None without decisions
    accepted: int  # the turn's decisions with accepted: true
    rejected: int  # ... with accepted: false


class ChatExample(TypedDict):
    messages: list[ChatMessage]
    metadata: ExampleMetadata


class Trajectory(TypedDict):
    session_id: str
    org_id: str
    turns: list[TurnDict]


class TurnsLine(TypedDict):
    key: str
    value: TurnDict


Record = TurnsLine | ChatExample | Trajectory


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


@dataclass(slots=True)
class Skips:
    """Skipped turns: counted by reason, and the first ``MAX_LISTED`` of them named (those
    skipped for what they are, not for a filter or a sibling)."""

    counts: Counter[SkipReason] = field(default_factory=Counter)
    listed: list[SkippedTurn] = field(default_factory=list)

    def add(self, key: str | None, reason: SkipReason) -> None:
        self.counts[reason] += 1
        named = reason not in (SkipReason.SESSION_BROKEN, SkipReason.NOT_ACCEPTED)
        if named and len(self.listed) < MAX_LISTED:
            self.listed.append({"key": key, "reason": reason})

    def as_counts(self) -> dict[str, int]:
        """Every reason of the closed list, in its order, with its count (0 included)."""
        return {reason.value: self.counts[reason] for reason in SkipReason}


# --- Reading turn lines -------------------------------------------------------------------


@dataclass(slots=True)
class TurnLines:
    """The latest revision of every key of a TURNS or FINAL file, in first-emission order.

    ``latest`` maps a key to the line of its latest revision, kept as bytes (parsed again
    when its session is built): a dict keeps the position of a key's first line, so its
    order is the order the turns were first emitted. A turn is its parsed key, never the
    key's text: ``latest`` holds each key as the worker spells it (``known_as``), so a
    revision keyed ``["s", "a1"]`` replaces one keyed ``["s","a1"]``.
    """

    latest: dict[str, bytes] = field(default_factory=dict)
    records: int = 0  # lines read, blank ones left out
    unkeyed: int = 0  # lines with no string key: not turns, of no knowable session

    def add(self, line: bytes) -> None:
        if not line.strip():
            return
        self.records += 1
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError:
            self.unkeyed += 1
            return
        key = doc.get("key") if isinstance(doc, dict) else None
        if not isinstance(key, str):
            self.unkeyed += 1
            return
        self.latest[known_as(key)] = line


def read_turn_lines(lines: Iterable[bytes]) -> TurnLines:
    read = TurnLines()
    for line in lines:
        read.add(line)
    return read


def turn_key(key: str) -> tuple[str, str] | None:
    """The (session_id, inference_call_id) a turn key names, or None when it names none."""
    try:
        pair = orjson.loads(key)
    except orjson.JSONDecodeError:
        return None
    if isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair):
        return pair[0], pair[1]
    return None


def known_as(key: str) -> str:
    """The key a turn is known by: one that names a turn (the JSON text of ``[session_id,
    inference_call_id]``, however spaced or escaped) as the worker writes it; any other as it
    is, which no turn's can equal (the worker's spelling of a pair is always a pair)."""
    pair = turn_key(key)
    return key if pair is None else worker_key(*pair).decode()


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


def parse_turn(line: bytes, call_id: str) -> TurnDict | None:
    """The Turn of a turn line whose key names ``call_id``, or None when it holds none."""
    brackets = len(line) - len(line.translate(None, b"{["))
    if brackets > MAX_TURN_DEPTH and _deeper_than(orjson.loads(line), MAX_TURN_DEPTH + 1):
        return None  # (the line's own object is one level)
    try:
        value = orjson.loads(line).get("value")
        Turn.model_validate(value)
    except (orjson.JSONDecodeError, ValidationError):
        return None
    turn = cast(TurnDict, value)
    if turn["inference_call_id"] != call_id or _completing(turn) is None:
        return None
    if any(m["role"] not in ("system", "user", "assistant", "tool") for m in turn["new_messages"]):
        return None
    return turn


class SessionTurn(NamedTuple):
    key: str
    turn: TurnDict | None  # None: the line is not a turn


def sessions(read: TurnLines, skips: Skips) -> Iterator[tuple[str, list[SessionTurn]]]:
    """Each session with its turns in first-emission order, sessions in the order of their
    first turn. A line whose key names no session is skipped here."""
    for _ in range(read.unkeyed):
        skips.add(None, SkipReason.NOT_A_TURN)
    grouped: dict[str, list[tuple[str, str, bytes]]] = {}
    for key, line in read.latest.items():
        pair = turn_key(key)
        if pair is None:
            skips.add(key, SkipReason.NOT_A_TURN)
            continue
        grouped.setdefault(pair[0], []).append((key, pair[1], line))
    for session_id, entries in grouped.items():
        yield session_id, [SessionTurn(key, parse_turn(line, call)) for key, call, line in entries]


# --- Chat ---------------------------------------------------------------------------------


def _as_text(result: Json) -> str:
    return result if isinstance(result, str) else orjson.dumps(result).decode()


def chat_messages(message: InferenceMessageDict, reasoning: bool) -> tuple[list[ChatMessage], bool]:
    """The chat messages of one InferenceMessage, and whether the chat format can hold it.

    Each tool result becomes a ``tool`` message, before the rest of its message (a result
    must follow the call it answers); text parts are joined with newlines, as the
    completion joins them; each tool call becomes an entry of ``tool_calls``.
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
            arguments = orjson.dumps(part["arguments"]).decode()
            function: ChatFunction = {"name": part["name"], "arguments": arguments}
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


def metadata(session_id: str, turn: TurnDict) -> ExampleMetadata:
    decisions = turn["decisions"]
    return {
        "session_id": session_id,
        "inference_call_id": turn["inference_call_id"],
        "agent_harness": decisions[0]["agent_harness"] if decisions else None,
        "accepted": sum(1 for d in decisions if d["accepted"]),
        "rejected": sum(1 for d in decisions if not d["accepted"]),
    }


def accepted(turn: TurnDict) -> bool:
    """At least one explicit accepted decision, and no rejected one (SPEC §9)."""
    decisions = turn["decisions"]
    return any(d["accepted"] and d["explicit"] for d in decisions) and all(
        d["accepted"] for d in decisions
    )


def chat_examples(
    session_id: str, turns: list[SessionTurn], options: Options, skips: Skips
) -> Iterator[ChatExample]:
    """One example per turn of the session whose history can be rebuilt.

    A turn's example ends with its assistant message; a message its turn holds after that
    one (a later ``sequence`` that arrived first) opens the next turn's part of the history.
    Once a turn breaks the history, every later turn of the session is skipped too.
    """
    history: list[ChatMessage] = []
    loop = ToolLoop()
    problem: SkipReason | None = None  # a break the next turn meets in its history
    broken = False
    for key, turn in turns:
        if broken:
            skips.add(key, SkipReason.SESSION_BROKEN)
            continue
        if turn is None or problem is not None:
            skips.add(key, SkipReason.NOT_A_TURN if turn is None else cast(SkipReason, problem))
            broken = True
            continue
        end = cast(int, _completing(turn)) + 1
        head, head_holds = _mapped(turn["new_messages"][:end], options.reasoning)
        problem = loop.extend(head) if head_holds else SkipReason.BROKEN_TOOL_LOOP
        if problem is not None:
            skips.add(key, problem)
            broken = True
            continue
        history.extend(head)
        if options.only_accepted and not accepted(turn):
            skips.add(key, SkipReason.NOT_ACCEPTED)
        else:
            yield {"messages": list(history), "metadata": metadata(session_id, turn)}
        tail, tail_holds = _mapped(turn["new_messages"][end:], options.reasoning)
        problem = loop.extend(tail) if tail_holds else SkipReason.BROKEN_TOOL_LOOP
        history.extend(tail)


# --- Trajectories and turns ---------------------------------------------------------------


def _session_problem(turns: list[SessionTurn]) -> tuple[int, SkipReason] | None:
    """The first turn of a session that breaks its conversation, and why; None when none."""
    loop = ToolLoop()
    for i, (_, turn) in enumerate(turns):
        if turn is None:
            return i, SkipReason.NOT_A_TURN
        chat, holds = _mapped(turn["new_messages"], False)
        problem = loop.extend(chat) if holds else SkipReason.BROKEN_TOOL_LOOP
        if problem is not None:
            return i, problem
    return None


def trajectory(
    session_id: str, turns: list[SessionTurn], options: Options, skips: Skips
) -> Trajectory | None:
    """The session as one trajectory, or None (its turns counted skipped) when a turn of it
    cannot be written or breaks its conversation."""
    found = _session_problem(turns)
    if found is not None:
        at, reason = found
        for i, (key, _) in enumerate(turns):
            skips.add(key, reason if i == at else SkipReason.SESSION_BROKEN)
        return None
    kept = [cast(TurnDict, turn) for _, turn in turns]
    orgs = (d["org_id"] for turn in kept for d in turn["decisions"])
    org_id = next(orgs, None) or normalize_org(options.org_id)
    return {"session_id": session_id, "org_id": org_id, "turns": kept}


def turns_lines(read: TurnLines, skips: Skips) -> Iterator[tuple[str, TurnsLine]]:
    """The turn lines as they are, by session (in the order of its first turn), then in
    first-emission order: a reader meets a session's turns together, as the other formats."""
    for session_id, turns in sessions(read, skips):
        for key, turn in turns:
            if turn is None:
                skips.add(key, SkipReason.NOT_A_TURN)
                continue
            yield session_id, {"key": key, "value": turn}


def records(read: TurnLines, options: Options, skips: Skips) -> Iterator[tuple[str, Record]]:
    """Every record of ``options.format``, with the session it belongs to, in order."""
    if options.format == "turns":
        yield from turns_lines(read, skips)
        return
    for session_id, turns in sessions(read, skips):
        if options.format == "chat":
            for example in chat_examples(session_id, turns, options, skips):
                yield session_id, example
        elif (line := trajectory(session_id, turns, options, skips)) is not None:
            yield session_id, line


# --- Split --------------------------------------------------------------------------------


def split_of(session_id: str, eval_fraction: float | None) -> Split:
    """``eval`` for a session whose hash falls below the fraction, else ``train``: the first
    8 bytes of the SHA-256 of the UTF-8 session id, big-endian, over 2**64. The same
    session always lands on the same side, whatever else the input holds."""
    if eval_fraction is None:
        return "all"
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).digest()
    return "eval" if int.from_bytes(digest[:8], "big") / 2**64 < eval_fraction else "train"

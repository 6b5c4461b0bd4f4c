"""The conversation of a session: its InferenceMessages as chat messages, the tool loop they
must keep, and each turn with the history before it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple, cast

import orjson

from stream_app.datasets.content import redacted
from stream_app.datasets.options import Options
from stream_app.datasets.record_types import ChatFunction, ChatMessage, ChatToolCall
from stream_app.datasets.skips import SkipReason, Skips
from stream_app.datasets.turn_lines import SessionTurn, completing_index
from stream_app.models.json_types import Json
from stream_app.models.turn import InferenceMessageDict, TurnDict


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


def chat_messages_of(
    messages: Iterable[InferenceMessageDict], reasoning: bool
) -> tuple[list[ChatMessage], bool]:
    out: list[ChatMessage] = []
    holds = True
    for message in messages:
        chat, ok = chat_messages(message, reasoning)
        out.extend(chat)
        holds = holds and ok
    return out, holds


class TurnStep(NamedTuple):
    """A turn whose history could be rebuilt: the messages before its assistant message
    (the session's history, then the turn's own) and that message."""

    key: str
    turn: TurnDict
    before: list[ChatMessage]
    completion: ChatMessage


def conversation(
    session_id: str, turns: Iterable[SessionTurn], options: Options, skips: Skips
) -> Iterator[TurnStep]:
    """The session's turns whose history can be rebuilt, in order. A message a turn holds
    after its assistant message (a later ``sequence`` that arrived first) opens the next
    turn's part of the history. Once a turn breaks the history, every later turn of the
    session is skipped too. ``before`` is shared: a consumer copies what it keeps.

    Every example of a turn holds its ``before``, so once that is over
    ``options.max_example_bytes`` (as TRL writes messages: OpenAI's are larger), this turn
    and every later one of the session are ``too_large``, and the history is let go: what
    is held is never much more than the largest example written."""
    history: list[ChatMessage] = []
    held = 0  # bytes of history, each message as orjson writes it
    loop = ToolLoop()
    problem: SkipReason | None = None  # a break the next turn meets in its history
    broken: SkipReason | None = None  # what every later turn of the session is skipped as
    for key, parsed in turns:
        if broken is not None:
            skips.add(key, broken)
            continue
        if isinstance(parsed, SkipReason) or problem is not None:
            skips.add(key, parsed if isinstance(parsed, SkipReason) else cast(SkipReason, problem))
            broken = SkipReason.SESSION_BROKEN
            continue
        turn = parsed if options.keep_credentials else redacted(parsed, skips)
        end = cast(int, completing_index(turn)) + 1
        head, head_holds = chat_messages_of(turn["new_messages"][:end], options.reasoning)
        problem = loop.extend(head) if head_holds else SkipReason.BROKEN_TOOL_LOOP
        if problem is not None:
            skips.add(key, problem)
            broken = SkipReason.SESSION_BROKEN
            continue
        history.extend(head[:-1])
        held += _sizes(head[:-1])
        if held > options.max_example_bytes:
            skips.add(key, SkipReason.TOO_LARGE)
            broken = SkipReason.TOO_LARGE
            history.clear()
            continue
        yield TurnStep(key, turn, history, head[-1])
        history.append(head[-1])
        tail, tail_holds = chat_messages_of(turn["new_messages"][end:], options.reasoning)
        problem = loop.extend(tail) if tail_holds else SkipReason.BROKEN_TOOL_LOOP
        history.extend(tail)
        held += _sizes([head[-1], *tail])


def _sizes(messages: list[ChatMessage]) -> int:
    """The bytes of ``messages`` as orjson writes each (the list's, less its brackets and
    commas: one call, not one a message)."""
    return len(orjson.dumps(messages)) - len(messages) - 1 if messages else 0


def prompt_hash(prompt: list[ChatMessage]) -> str:
    """The identity of a prompt: its messages compared as structures (keys in any order)."""
    return hashlib.sha256(orjson.dumps(prompt, option=orjson.OPT_SORT_KEYS)).hexdigest()


def response_bytes(message: ChatMessage) -> bytes:
    """What an answer says, its tool call ids left out: two retries that call the same tool
    with the same arguments answered alike."""
    calls = [c["function"] for c in message.get("tool_calls", ())]
    return orjson.dumps([message["content"], calls], option=orjson.OPT_SORT_KEYS)

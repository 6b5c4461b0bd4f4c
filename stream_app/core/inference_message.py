"""Message → InferenceMessage (SPEC §2), and the inference call id of a completing message.

A message arrives as the pydantic model or as intake's msgspec Struct (``core/input_structs.py``):
both have the fields read here, under the same names (the protocols below), so one
translation serves both.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Sequence
from typing import Protocol, cast

import orjson

from stream_app.core.counts import Count
from stream_app.core.limits import check_depth, shallow, too_deep
from stream_app.core.redaction import redact, redact_text
from stream_app.models.json_types import Json, JsonObject
from stream_app.models.message import Role
from stream_app.models.turn import InferenceMessageDict, PartDict


class ToolResultFields(Protocol):
    @property
    def toolCallId(self) -> str: ...
    @property
    def result(self) -> Json: ...


class PartFields(Protocol):
    @property
    def text(self) -> str | None: ...
    @property
    def reasoning(self) -> str | None: ...
    @property
    def toolResult(self) -> ToolResultFields | None: ...


class ToolCallFields(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def arguments(self) -> str | dict[str, Json] | None: ...


class MessageFields(Protocol):
    """What translation reads of a message (its role is passed mapped)."""

    @property
    def content(self) -> Sequence[PartFields] | None: ...
    @property
    def toolCalls(self) -> Sequence[ToolCallFields] | None: ...
    @property
    def finishReason(self) -> str | None: ...
    @property
    def messageId(self) -> str | None: ...


def _arguments(call: ToolCallFields, i: int, counts: Counter[Count]) -> JsonObject:
    """The ``i``-th tool call's arguments as an object (named in an error only when one is
    raised: most calls raise none)."""
    args = call.arguments
    if args is None or isinstance(args, dict):
        return args or {}  # an object came with the record, whose depth is checked
    try:
        parsed = orjson.loads(args)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):  # orjson's own, at 1024 levels
            raise too_deep(f"message.toolCalls.{i}.arguments") from None
        parsed = None
    if not shallow(args):
        check_depth(parsed, args, f"message.toolCalls.{i}.arguments")
    if isinstance(parsed, dict):
        return parsed
    counts[Count.MALFORMED_TOOL_ARGUMENTS] += 1
    return {}


def inference_message(
    message: MessageFields, role: Role, counts: Counter[Count], *, redact_content: bool = False
) -> InferenceMessageDict:
    """The contract form; content parts in order, then tool calls in order.

    With ``redact_content`` (``STREAM_APP_REDACT_CONTENT``) the text, reasoning, tool
    arguments and tool results go through the Basic redaction of ``raw``: this is where a
    message's content enters the core, so nothing downstream (state, turns, dead letters
    written from state) ever holds the unredacted copy.
    """
    parts: list[PartDict] = []
    for part in message.content or ():
        if part.text is not None:
            parts.append({"type": "text", "content": part.text})
        elif part.reasoning is not None:
            parts.append({"type": "reasoning", "content": part.reasoning})
        elif part.toolResult is not None:
            result = part.toolResult
            parts.append(
                {"type": "tool_call_response", "id": result.toolCallId, "result": result.result}
            )
        else:
            counts[Count.PARTS_SKIPPED] += 1
    for i, call in enumerate(message.toolCalls or ()):
        parts.append(
            {
                "type": "tool_call",
                "id": call.id,
                "name": call.name,
                "arguments": _arguments(call, i, counts),
            }
        )
    if redact_content:
        parts = [_redacted(part) for part in parts]
    return {"role": role, "parts": parts, "finish_reason": message.finishReason or None}


def _redacted(part: PartDict) -> PartDict:
    if part["type"] == "text":
        return {**part, "content": redact_text(part["content"])}
    if part["type"] == "reasoning":
        return {**part, "content": redact_text(part["content"])}
    if part["type"] == "tool_call":
        return {**part, "arguments": redact(part["arguments"])}
    return {**part, "result": redact(part["result"])}  # tool_call_response


def redacted_event(doc: JsonObject, translated: InferenceMessageDict) -> JsonObject:
    """A message event as a later dead letter carries it when content is redacted: its
    content and tool calls are those of its redacted InferenceMessage put back in the
    event's form (redacted once, not twice; parts the translation skips, such as images,
    are left out, and malformed tool arguments are ``{}`` as translated), the rest as it
    came. ``doc`` is an event the model took, so its ``message`` is an object."""
    content: list[Json] = []
    calls: list[Json] = []
    for part in translated["parts"]:
        if part["type"] == "text" or part["type"] == "reasoning":
            content.append({part["type"]: part["content"]})
        elif part["type"] == "tool_call_response":
            content.append({"toolResult": {"toolCallId": part["id"], "result": part["result"]}})
        else:
            calls.append({"id": part["id"], "name": part["name"], "arguments": part["arguments"]})
    if not content and not calls:
        return doc  # nothing the translation kept, so nothing it redacted
    event_message = cast(JsonObject, doc["message"])
    message: JsonObject = {
        k: v for k, v in event_message.items() if k not in ("content", "toolCalls")
    }
    if content:
        message["content"] = content
    if calls:
        message["toolCalls"] = calls
    return {**doc, "message": message}


def identity(message_id: str | None, sequence: int | None) -> str | None:
    """A message is the same message again when its messageId, else its sequence, repeats."""
    if message_id:
        return "id:" + message_id
    if sequence is not None:
        return f"seq:{sequence}"
    return None


# The call ids derived for a completing message without a messageId (``inference_call_id``),
# after "<conversationId>:": the canonical text of an int64 sequence, or 16 hex digits.
_DERIVED = re.compile(r"seq:(?:0|-?[1-9][0-9]*)|sha256:[0-9a-f]{16}")


def derived_form(session_id: str, message_id: str) -> bool:
    """Whether a producer's ``messageId`` has the form of a call id this processor derives in
    the session (``inference_call_id``): a completing message under such an id could take
    the key of another message's turn, so it is refused, and derived ids and producers' ids
    never meet."""
    prefix = session_id + ":"
    return message_id.startswith(prefix) and (
        _DERIVED.fullmatch(message_id, len(prefix)) is not None
    )


def inference_call_id(
    session_id: str, message_id: str | None, sequence: int | None, raw_message: Json
) -> str:
    """``raw_message``: the message as it came (hashed when it has neither id)."""
    if message_id:
        return message_id
    if sequence is not None:
        return f"{session_id}:seq:{sequence}"
    canonical = orjson.dumps(raw_message, option=orjson.OPT_SORT_KEYS)
    return f"{session_id}:sha256:{hashlib.sha256(canonical).hexdigest()[:16]}"

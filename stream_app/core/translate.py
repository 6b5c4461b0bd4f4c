"""Message → InferenceMessage (SPEC §2), and the inference call id of a completing message."""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

import orjson

from stream_app.core.counts import Count
from stream_app.core.limits import check_depth, too_deep
from stream_app.models.message import Message, ToolCall


def _arguments(call: ToolCall, field: str, counts: Counter[Count]) -> dict[str, Any]:
    args = call.arguments
    if args is None or isinstance(args, dict):
        return args or {}  # an object came with the record, whose depth is checked
    try:
        parsed = orjson.loads(args)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):  # orjson's own, at 1024 levels
            raise too_deep(field) from None
        parsed = None
    check_depth(parsed, args, field)
    if isinstance(parsed, dict):
        return parsed
    counts[Count.MALFORMED_TOOL_ARGUMENTS] += 1
    return {}


def inference_message(message: Message, counts: Counter[Count]) -> dict[str, Any]:
    """The contract form; content parts in order, then tool calls in order."""
    parts: list[dict[str, Any]] = []
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
                "arguments": _arguments(call, f"message.toolCalls.{i}.arguments", counts),
            }
        )
    return {"role": message.role, "parts": parts, "finish_reason": message.finishReason or None}


def identity(message: Message) -> str | None:
    """A message is the same message again when its messageId, else its sequence, repeats."""
    if message.messageId:
        return "id:" + message.messageId
    if message.sequence is not None:
        return f"seq:{message.sequence}"
    return None


def inference_call_id(session_id: str, message: Message, raw_message: Any) -> str:
    if message.messageId:
        return message.messageId
    if message.sequence is not None:
        return f"{session_id}:seq:{message.sequence}"
    canonical = orjson.dumps(raw_message, option=orjson.OPT_SORT_KEYS)
    return f"{session_id}:sha256:{hashlib.sha256(canonical).hexdigest()[:16]}"

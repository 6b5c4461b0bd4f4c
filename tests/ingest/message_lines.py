"""Lines of the messages topic, as ``stream-app replay`` reads them and a worker is sent: the
turns the agents' telemetry decisions name (the log records are in ``otlp_records``)."""

from __future__ import annotations

from typing import Any


def message(session: str, n: int, role: str, **fields: Any) -> dict[str, Any]:
    """A line of the messages topic: message ``n`` of ``session``."""
    return {
        "topic": "messages",
        "key": session,
        "value": {
            "conversationId": session,
            "message": {"role": role, "sequence": str(n), **fields},
        },
    }


def a_turn(session: str, message_id: str, call_id: str) -> list[dict[str, Any]]:
    """A user's prompt and the assistant's answer with one tool call: one turn, named by
    ``message_id`` and ``call_id``, for a decision to join."""
    return [
        message(session, 1, "ROLE_USER", messageId=f"{message_id}-u", content=[{"text": "go"}]),
        message(
            session,
            2,
            "ROLE_ASSISTANT",
            messageId=message_id,
            finishReason="tool_calls",
            content=[{"text": "editing"}],
            toolCalls=[{"id": call_id, "name": "Edit", "arguments": "{}"}],
        ),
    ]

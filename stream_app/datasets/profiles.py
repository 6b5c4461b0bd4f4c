"""A profile's encoding: OpenAI's (arguments as JSON text, weights, its preference lines) or
TRL's (arguments as objects)."""

from __future__ import annotations

from collections.abc import Iterable

import orjson

from stream_app.datasets.options import Profile
from stream_app.datasets.record_types import (
    ChatMessage,
    ChatToolCall,
    DpoRow,
    OpenAIPreference,
    OpenAIPreferenceInput,
    Tool,
)


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


def pair_row(
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

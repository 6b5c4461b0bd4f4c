"""The output contract: ``Turn`` v1 and its ``InferenceMessage`` parts (``schemas/turn.v1.json``).

The core builds turns as plain dicts in this field order (cheap to store and to serialize
with orjson); these models are the contract they are tested against.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from stream_app.models.decision import DeveloperDecision


class _Output(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class TextPart(_Output):
    type: Literal["text"]
    content: str


class ReasoningPart(_Output):
    type: Literal["reasoning"]
    content: str


class ToolCallPart(_Output):
    type: Literal["tool_call"]
    id: str
    name: str
    arguments: dict[str, Any]


class ToolCallResponsePart(_Output):
    type: Literal["tool_call_response"]
    id: str
    result: Any


Part = Annotated[
    TextPart | ReasoningPart | ToolCallPart | ToolCallResponsePart, Field(discriminator="type")
]


class InferenceMessage(_Output):
    role: str
    parts: list[Part]
    finish_reason: str | None


class Turn(_Output):
    new_messages: list[InferenceMessage]
    completion: str
    decisions: list[DeveloperDecision]
    inference_call_id: str
    tool_calls: list[ToolCallPart]

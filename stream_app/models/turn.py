"""The output contract: ``Turn`` v1 and its ``InferenceMessage`` parts (``schemas/turn.v1.json``).

The core builds turns as plain dicts in this field order (cheap to store and to serialize
with orjson): the ``*Dict`` types below say what those dicts hold, field for field with the
models, which are the contract they are tested against.
"""

from __future__ import annotations

from typing import Annotated, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from stream_app.models.decision import DecisionDict, DeveloperDecision
from stream_app.models.json_types import Json, JsonObject, ParsedJson
from stream_app.models.message import Role


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
    arguments: dict[str, ParsedJson]


class ToolCallResponsePart(_Output):
    type: Literal["tool_call_response"]
    id: str
    result: ParsedJson


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


class TextPartDict(TypedDict):
    type: Literal["text"]
    content: str


class ReasoningPartDict(TypedDict):
    type: Literal["reasoning"]
    content: str


class ToolCallDict(TypedDict):
    type: Literal["tool_call"]
    id: str
    name: str
    arguments: JsonObject


class ToolCallResponseDict(TypedDict):
    type: Literal["tool_call_response"]
    id: str
    result: Json


PartDict = TextPartDict | ReasoningPartDict | ToolCallDict | ToolCallResponseDict


class InferenceMessageDict(TypedDict):
    role: Role
    parts: list[PartDict]
    finish_reason: str | None


class TurnBodyDict(TypedDict):
    """A Turn without its decisions: what a session keeps of an open turn, written once
    (``turn_bodies``), while its decisions change."""

    new_messages: list[InferenceMessageDict]
    completion: str
    inference_call_id: str
    tool_calls: list[ToolCallDict]


class TurnDict(TypedDict):
    new_messages: list[InferenceMessageDict]
    completion: str
    decisions: list[DecisionDict]
    inference_call_id: str
    tool_calls: list[ToolCallDict]

"""The messages topic's input: LLMMessagePublishedEvent and the chat API's Message (SPEC §2).

Only the fields the pipeline reads are validated; unknown fields are ignored, and an
optional field that is ``null`` counts as absent (protobuf-JSON producers write either).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from stream_app.models.json_types import DateTimeStr, ParsedJson

Role = Literal["system", "user", "assistant", "tool"]

_ROLES: dict[str | int, Role] = {
    "ROLE_SYSTEM": "system",
    "ROLE_USER": "user",
    "ROLE_ASSISTANT": "assistant",
    "ROLE_TOOL": "tool",
    0: "system",
    1: "user",
    2: "assistant",
    3: "tool",
}
# Same regex and search semantics as JSON Schema's "pattern" (Python re, Unicode \d).
_SEQUENCE = re.compile(r"^-?\d+$")


def role_of(value: object) -> Role | None:
    """The role ``value`` names (a name, or 0-3 also as an integral float); None if none."""
    if type(value) is str:  # the common spelling, first
        return _ROLES.get(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    return _ROLES.get(value)


def _role(value: object) -> Role:
    role = role_of(value)
    if role is None:
        raise ValueError("must be one of ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT, ROLE_TOOL or 0-3")
    return role


def sequence_of(value: object) -> int | None:
    """A ``sequence`` as the integer it spells; raises ValueError when it spells none."""
    if value is None:
        return None
    if type(value) is int:
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and (value.isdecimal() or _SEQUENCE.search(value)):
        return int(value)  # isdecimal: what \d matches, without the regex
    raise ValueError(r"must be an integer or a string matching ^-?\d+$")


class _Input(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class ToolResult(_Input):
    toolCallId: str
    result: ParsedJson


class ContentPart(_Input):
    """A one-of by key; a part with none of the known keys (image, file, ...) is skipped."""

    text: str | None = None
    reasoning: str | None = None
    toolResult: ToolResult | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> ContentPart:
        # Three comparisons added, not a generator summed: this runs for every part.
        kinds = (self.text is not None) + (self.reasoning is not None)
        if kinds + (self.toolResult is not None) > 1:
            raise ValueError("a content part holds exactly one of text, reasoning, toolResult")
        return self


class ToolCall(_Input):
    id: str
    name: str
    arguments: str | dict[str, ParsedJson] | None = None


class Message(_Input):
    role: Annotated[Role, BeforeValidator(_role)]
    content: list[ContentPart] | None = None
    toolCalls: list[ToolCall] | None = None
    messageId: str | None = None
    sequence: Annotated[int | None, BeforeValidator(sequence_of)] = None
    finishReason: str | None = None

    @model_validator(mode="after")
    def _has_entry(self) -> Message:
        if not self.content and not self.toolCalls:
            raise ValueError("at least one of content and toolCalls must have an entry")
        return self


class LLMMessagePublishedEvent(_Input):
    eventId: str | None = None
    conversationId: str = Field(min_length=1)
    orgId: str | None = None
    publishedAt: DateTimeStr | None = None
    message: Message


__all__ = [
    "ContentPart",
    "LLMMessagePublishedEvent",
    "Message",
    "ToolCall",
    "role_of",
    "sequence_of",
]

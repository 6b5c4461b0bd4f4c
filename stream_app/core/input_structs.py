"""The two inputs as msgspec Structs: intake's fast path, checked in one pass in C.

The pydantic models (``models/message.py``, ``models/decision.py``) are the contract: they
decide every record these Structs do not take, and word its dead letter. Both check the same
document, as orjson parsed it (``core/intake._parse``), and a Struct takes a document only
when the models would take it with the same values; the few rules the models keep in Python
(a role spelled as a number, ``sequence``, a content part's one kind, a message's one entry,
RFC 3339 date-times, the tenant) are checked after the Struct by ``core/intake.py``, which
leaves any document failing one to the models. So the fast path never changes what a record
becomes, only how fast (``tests/core/test_input_structs.py`` holds it to that on generated records).

Field types mirror the models: a union lists what the models' before-validators take,
unknown fields are ignored on messages and refused on decisions, and ids carry the
1,024-character limit of ``core/limits.py`` (past it the models word the dead letter).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

import msgspec

from stream_app.core.limits import MAX_ID_CHARS

Id = Annotated[str, msgspec.Meta(max_length=MAX_ID_CHARS)]

if TYPE_CHECKING:
    from stream_app.models.json_types import Json as AnyJson
else:  # msgspec takes any value as ``object``; the documents it converts are JSON (orjson's)
    AnyJson = object


class ToolResultStruct(msgspec.Struct, frozen=True):
    toolCallId: Id
    result: AnyJson


class ContentPartStruct(msgspec.Struct, frozen=True):
    text: str | None = None
    reasoning: str | None = None
    toolResult: ToolResultStruct | None = None


class ToolCallStruct(msgspec.Struct, frozen=True):
    id: Id
    name: str
    arguments: str | dict[str, AnyJson] | None = None


class MessageStruct(msgspec.Struct, frozen=True):
    role: str | int | float
    content: list[ContentPartStruct] | None = None
    toolCalls: list[ToolCallStruct] | None = None
    messageId: Id | None = None
    sequence: str | int | float | None = None
    finishReason: str | None = None


class EventStruct(msgspec.Struct, frozen=True):
    conversationId: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ID_CHARS)]
    message: MessageStruct
    eventId: Id | None = None
    orgId: str | None = None
    publishedAt: str | None = None


class DecisionStruct(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    decision_id: Id
    session_id: Id
    user_id: str | None
    agent_harness: Literal["claude-code", "copilot", "codex", "pi"]
    file_path: str
    accepted: bool
    explicit: bool
    interaction_mode: Literal["agent", "inline"]
    commit_sha: str | None
    call_id: Id | None
    edit_retention_score: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)] | None
    observation_delay_ms: Annotated[int, msgspec.Meta(ge=0)] | float | None
    occurred_at: str
    raw: dict[str, AnyJson]
    org_id: str | None = None
    captured_at: str | None = None

"""The dead-letter record (SPEC §6): the original bytes, where they came from, and why."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from stream_app.models.json_types import DateTimeStr, JsonInt


class Reason(StrEnum):
    INVALID_JSON = "invalid_json"
    SCHEMA = "schema"
    TENANT_MISMATCH = "tenant_mismatch"
    TOO_LARGE = "too_large"
    UNATTRIBUTABLE_DECISION = "unattributable_decision"
    AMBIGUOUS_DECISION = "ambiguous_decision"
    ORPHANED_DECISION = "orphaned_decision"


ReasonName = Literal[
    "invalid_json",
    "schema",
    "tenant_mismatch",
    "too_large",
    "unattributable_decision",
    "ambiguous_decision",
    "orphaned_decision",
]


class DeadLetter(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    source_topic: str
    partition: JsonInt = Field(ge=0)
    offset: JsonInt = Field(ge=0)
    key: str | None
    value: str | None
    encoding: Literal["utf-8", "base64"]
    reason: ReasonName
    error: str = Field(min_length=1)
    dead_lettered_at: DateTimeStr

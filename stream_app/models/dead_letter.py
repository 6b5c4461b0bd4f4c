"""The dead-letter record (SPEC §6): the original bytes, where they came from, and why.

The core builds dead letters as plain dicts (``DeadLetterDict``); the model is the contract
they are tested against.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal, NotRequired, TypedDict

from pydantic import BaseModel, ConfigDict, Field, model_validator

from stream_app.models.json_types import DateTimeStr, JsonInt


class Reason(StrEnum):
    INVALID_JSON = "invalid_json"
    SCHEMA = "schema"
    TENANT_MISMATCH = "tenant_mismatch"
    TOO_LARGE = "too_large"
    UNATTRIBUTABLE_DECISION = "unattributable_decision"
    AMBIGUOUS_DECISION = "ambiguous_decision"
    ORPHANED_DECISION = "orphaned_decision"
    TURN_TOO_LARGE = "turn_too_large"
    SESSION_LIMIT = "session_limit"
    PROCESSING_ERROR = "processing_error"
    # The agents' telemetry (SPEC §10): a decision event that cannot become a decision, and a
    # telemetry record that is not an OTLP ExportLogsServiceRequest.
    UNTRANSLATABLE_TELEMETRY = "untranslatable_telemetry"
    INVALID_OTLP = "invalid_otlp"


Encoding = Literal["utf-8", "base64"]  # of a dead letter's key and value
Sha256Hex = Annotated[str, Field(min_length=64, max_length=64, pattern=r"^[0-9a-f]{64}$")]

# Present only when the key or value was cut (core/dead_letter.py): absent, never null.
_TRUNCATION_FIELDS = (
    "truncated",
    "original_length",
    "original_sha256",
    "original_key_length",
    "original_key_sha256",
)
# Each pair is present together and only with ``truncated`` (the schema's dependentRequired).
_PAIRS = (("original_length", "original_sha256"), ("original_key_length", "original_key_sha256"))


class DeadLetter(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    source_topic: str
    partition: JsonInt = Field(ge=0)
    offset: JsonInt = Field(ge=0)
    key: str | None
    value: str | None
    encoding: Encoding
    # Lax for this field alone: strict takes only the enum's members, and JSON has strings.
    reason: Reason = Field(strict=False)
    error: str = Field(min_length=1)
    dead_lettered_at: DateTimeStr
    truncated: Literal[True] | None = None
    original_length: JsonInt | None = Field(default=None, ge=0)
    original_sha256: Sha256Hex | None = None
    original_key_length: JsonInt | None = Field(default=None, ge=0)
    original_key_sha256: Sha256Hex | None = None

    @model_validator(mode="before")
    @classmethod
    def _absent_not_null(cls, data: object) -> object:
        if isinstance(data, dict):
            for name in _TRUNCATION_FIELDS:
                if name in data and data[name] is None:
                    raise ValueError(f"{name} is absent when nothing was truncated, never null")
            if "truncated" in data and data["truncated"] is not True:
                raise ValueError("truncated is true when present")  # Literal[True] takes 1
        return data

    @model_validator(mode="after")
    def _together(self) -> DeadLetter:
        for pair in _PAIRS:
            present = [getattr(self, name) is not None for name in pair]
            if any(present) and not (all(present) and self.truncated):
                raise ValueError(f"{' and '.join(pair)} come together, with truncated")
        if self.truncated and self.original_length is None and self.original_key_length is None:
            raise ValueError("truncated comes with the figures of what was cut")
        return self


class DeadLetterDict(TypedDict):
    source_topic: str
    partition: int
    offset: int
    key: str | None
    value: str | None
    encoding: Encoding
    reason: Reason  # a ``str``: JSON writes it as its value
    error: str
    dead_lettered_at: str
    truncated: NotRequired[Literal[True]]
    original_length: NotRequired[int]
    original_sha256: NotRequired[str]
    original_key_length: NotRequired[int]
    original_key_sha256: NotRequired[str]

"""``DeveloperDecision``: the decisions topic's input and the ``decisions`` of a Turn (SPEC §3)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from stream_app.models.json_types import DateTimeStr, JsonInt

AgentHarness = Literal["claude-code", "copilot", "codex", "pi"]
InteractionMode = Literal["agent", "inline"]


class DecisionPayload(BaseModel):
    """What a producer may send: the contract, less the two fields the server binds.

    A missing ``org_id`` is bound to the deployment's tenant and a missing ``captured_at`` is
    stamped on first store, so only those two may be absent (or null).
    """

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    decision_id: str
    org_id: str | None = None
    session_id: str
    user_id: str | None
    agent_harness: AgentHarness
    file_path: str
    accepted: bool
    explicit: bool
    interaction_mode: InteractionMode
    commit_sha: str | None
    call_id: str | None
    edit_retention_score: float | None = Field(ge=0.0, le=1.0)
    observation_delay_ms: JsonInt | None = Field(ge=0)
    occurred_at: DateTimeStr
    captured_at: DateTimeStr | None = None
    raw: dict[str, Any]


class DeveloperDecision(DecisionPayload):
    """The contract as emitted: every field present (``schemas/developer-decision.v1.json``)."""

    org_id: str
    captured_at: DateTimeStr


DECISION_FIELDS: tuple[str, ...] = tuple(DeveloperDecision.model_fields)

"""``DeveloperDecision``: the decisions topic's input and the ``decisions`` of a Turn (SPEC §3).

The models check what arrives; past intake the core keeps a decision as a plain dict
(``DecisionDict``), which orjson writes to state and to turns as it is.
"""

from __future__ import annotations

from typing import Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from stream_app.models.json_types import DateTimeStr, JsonInt, JsonObject, ParsedJson

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
    raw: dict[str, ParsedJson]


class DeveloperDecision(DecisionPayload):
    """The contract as emitted: every field present (``schemas/developer-decision.v1.json``)."""

    org_id: str
    captured_at: DateTimeStr


class DecisionDict(TypedDict):
    """A ``DeveloperDecision`` as the core keeps it and a Turn carries it, fields in the
    contract's order. ``org_id`` is bound to the tenant at intake; ``captured_at`` is None
    only until the decision is first stored."""

    decision_id: str
    org_id: str
    session_id: str
    user_id: str | None
    agent_harness: AgentHarness
    file_path: str
    accepted: bool
    explicit: bool
    interaction_mode: InteractionMode
    commit_sha: str | None
    call_id: str | None
    edit_retention_score: float | None
    observation_delay_ms: int | None
    occurred_at: str
    captured_at: str | None
    raw: JsonObject

"""The developers' verdicts on a turn: its metadata counts, whether it is accepted, its label."""

from __future__ import annotations

from stream_app.datasets.record_types import ExampleMetadata
from stream_app.datasets.skips import SkipReason
from stream_app.models.timestamps import instant_ns
from stream_app.models.turn import TurnDict


def metadata(session_id: str, turn: TurnDict) -> ExampleMetadata:
    decisions = turn["decisions"]
    # The latest by instant (then decision_id, the Turn's own order), not by the spelling
    # of occurred_at, which keeps the offset and precision it arrived with.
    scores = [
        (instant_ns(d["occurred_at"]), d["decision_id"], d["edit_retention_score"])
        for d in decisions
        if d["edit_retention_score"] is not None
    ]
    return {
        "session_id": session_id,
        "inference_call_id": turn["inference_call_id"],
        "agent_harness": decisions[0]["agent_harness"] if decisions else None,
        "accepted_explicit": sum(1 for d in decisions if d["accepted"] and d["explicit"]),
        "rejected_explicit": sum(1 for d in decisions if not d["accepted"] and d["explicit"]),
        "accepted_implicit": sum(1 for d in decisions if d["accepted"] and not d["explicit"]),
        "rejected_implicit": sum(1 for d in decisions if not d["accepted"] and not d["explicit"]),
        "retention_score": max(scores)[2] if scores else None,
    }


def accepted(turn: TurnDict) -> bool:
    """At least one explicit accepted decision, and no rejected one (SPEC §9)."""
    decisions = turn["decisions"]
    return any(d["accepted"] and d["explicit"] for d in decisions) and all(
        d["accepted"] for d in decisions
    )


def verdict(turn: TurnDict, include_implicit: bool) -> bool | SkipReason:
    """The turn's label: its explicit decisions' (implicit ones, with ``include_implicit``,
    only when it has no explicit one), or why it has none."""
    explicit = {d["accepted"] for d in turn["decisions"] if d["explicit"]}
    implicit = {d["accepted"] for d in turn["decisions"] if not d["explicit"]}
    pool = explicit or (implicit if include_implicit else set())
    if not pool:
        return SkipReason.NO_VERDICT
    if len(pool) > 1:
        return SkipReason.CONFLICTING_VERDICTS
    return pool.pop()

"""Trajectories: a session, every turn of it, as one line."""

from __future__ import annotations

from typing import cast

from stream_app.core.tenant import normalize_org
from stream_app.datasets.content import redacted, timestamped
from stream_app.datasets.conversation import ToolLoop, chat_messages_of
from stream_app.datasets.options import Options
from stream_app.datasets.record_types import Trajectory
from stream_app.datasets.skips import SkipReason, Skips
from stream_app.datasets.turn_lines import SessionTurn
from stream_app.models.turn import TurnDict


def _session_problem(turns: list[SessionTurn]) -> tuple[int, SkipReason] | None:
    """The first turn of a session that breaks its conversation, and why; None when none."""
    loop = ToolLoop()
    for i, (_, turn) in enumerate(turns):
        if isinstance(turn, SkipReason):
            return i, turn
        chat, holds = chat_messages_of(turn["new_messages"], False)
        problem = loop.extend(chat) if holds else SkipReason.BROKEN_TOOL_LOOP
        if problem is not None:
            return i, problem
    return None


def trajectory(
    session_id: str, turns: list[SessionTurn], options: Options, skips: Skips
) -> Trajectory | None:
    """The session as one trajectory, or None (its turns counted skipped) when a turn of it
    cannot be written or breaks its conversation. Instants in RFC 3339 UTC, microseconds."""
    found = _session_problem(turns)
    if found is not None:
        at, reason = found
        for i, (key, _) in enumerate(turns):
            skips.add(key, reason if i == at else SkipReason.SESSION_BROKEN)
        return None
    kept = [cast(TurnDict, turn) for _, turn in turns]
    if not options.keep_credentials:
        kept = [redacted(turn, skips) for turn in kept]
    kept = [timestamped(turn) for turn in kept]
    orgs = (d["org_id"] for turn in kept for d in turn["decisions"])
    org_id = next(orgs, None) or normalize_org(options.org_id)
    return {"session_id": session_id, "org_id": org_id, "turns": kept}

"""Trajectories: a session, every turn of it, as one line."""

from __future__ import annotations

import orjson

from stream_app.core.tenant import normalize_org
from stream_app.datasets.content import redacted, timestamped
from stream_app.datasets.conversation import ToolLoop, chat_messages_of
from stream_app.datasets.options import Options
from stream_app.datasets.record_types import Trajectory
from stream_app.datasets.skips import SkipReason, Skips
from stream_app.datasets.turn_lines import SessionTurns
from stream_app.models.turn import TurnDict


def trajectory(
    session_id: str, turns: SessionTurns, options: Options, skips: Skips
) -> Trajectory | None:
    """The session as one trajectory, or None (its turns counted skipped) when a turn of it
    cannot be written or breaks its conversation, or the turns are more than
    ``options.max_example_bytes`` (read no further: ``too_large``). Instants in RFC 3339
    UTC, microseconds."""
    loop = ToolLoop()
    marked = Skips()  # the redactions of the turns kept, counted once the line is whole
    kept: list[TurnDict] = []
    size = 0  # of the kept turns, as orjson writes them: the line is larger
    for at, (_, turn) in enumerate(turns):
        if isinstance(turn, SkipReason):
            _skipped(turns, at, turn, skips)
            return None
        chat, holds = chat_messages_of(turn["new_messages"], False)
        problem = loop.extend(chat) if holds else SkipReason.BROKEN_TOOL_LOOP
        if problem is not None:
            _skipped(turns, at, problem, skips)
            return None
        if not options.keep_credentials:
            turn = redacted(turn, marked)
        kept.append(timestamped(turn))
        size += len(orjson.dumps(kept[-1]))
        if size > options.max_example_bytes:
            for key in turns.turn_keys():
                skips.add(key, SkipReason.TOO_LARGE)
            return None
    skips.redacted += marked.redacted
    orgs = (d["org_id"] for turn in kept for d in turn["decisions"])
    org_id = next(orgs, None) or normalize_org(options.org_id)
    return {"session_id": session_id, "org_id": org_id, "turns": kept}


def _skipped(turns: SessionTurns, at: int, reason: SkipReason, skips: Skips) -> None:
    """Every turn of a broken session counted: the one at ``at`` for ``reason``, the others
    as ``session_broken``."""
    for i, key in enumerate(turns.turn_keys()):
        skips.add(key, reason if i == at else SkipReason.SESSION_BROKEN)

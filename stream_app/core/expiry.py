"""Bounded state (SPEC §4): idle sessions and turns past the late-decision window go.

A decision still waiting when its session goes is dead-lettered, so nothing vanishes. A turn
past its window, or of a session that expires, is closed (``core/finality.py``): it leaves
the state at once, emitted for the shell to keep until its final record is written.
"""

from __future__ import annotations

from stream_app.core import finality
from stream_app.core.counts import Count
from stream_app.core.dead_letter import dead_letter
from stream_app.core.policy import Policy
from stream_app.core.records import Outputs
from stream_app.core.session import SessionState
from stream_app.models.dead_letter import Reason


def expiring(state: SessionState, policy: Policy, now: float) -> bool:
    """Whether ``expire`` would change anything at ``now`` (past the session's idle time or
    its oldest turn's window): checked on every record, so spelled out rather than through
    ``finality.next_at``, which also weighs closed turns."""
    if now > state.last_seen + policy.session_ttl_seconds:
        return True
    for oldest in state.turns.values():
        return now > oldest.emitted_at + policy.late_decision_window_seconds
    return False


def expire(
    state: SessionState, policy: Policy, now: float, unsent: bool = False
) -> tuple[SessionState | None, Outputs]:
    """Closes the turns past their window; expires the session if it is idle past its time
    (None: the session is gone). ``unsent``: turns of the session closed before are still to
    be written (the shell's, ``state/closed.py``); an expired session with turns to be
    written, those or any it closes now, starts again, empty (``SessionState.start_again``),
    counted ``sessions_expired``, and is returned: its closed turns' entries are its own."""
    out = Outputs()
    horizon = now - policy.late_decision_window_seconds
    stale = []
    for key, turn in state.turns.items():  # in emission order: the oldest come first
        if turn.emitted_at >= horizon:
            break
        stale.append(key)
    for key in stale:
        finality.close(state, key, finality.WINDOW, policy, out)
    if stale:
        out.counts[Count.TURNS_CLOSED] += len(stale)
    idle = now - state.last_seen
    if idle > policy.session_ttl_seconds:
        for waiting in state.waiting_decisions.values():
            error = (
                f"no turn of session {state.session_id!r} reached call_id {waiting.call_id!r} "
                f"before the session expired (idle {idle:.0f} s > "
                f"{policy.session_ttl_seconds:.0f} s)"
            )
            out.dead_letters.append(
                dead_letter(waiting.origin, Reason.ORPHANED_DECISION, error, now)
            )
            out.counts[Count.dead_letter(Reason.ORPHANED_DECISION)] += 1
        out.counts[Count.PENDING_MESSAGES_EXPIRED] += len(state.pending_messages)
        out.counts[Count.SESSIONS_EXPIRED] += 1
        finality.close_all(state, finality.EXPIRED, policy, out)
        if not out.closed and not unsent:
            return None, out
        state.start_again(now)
    return state, out

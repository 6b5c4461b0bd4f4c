"""When a turn can no longer change (SPEC §8): closing it, and its final record.

A turn leaves the open turns of its session in three ways, each a ``final_reason``:

- ``window``: its late-decision window has passed (``final_after`` is before ``now``);
- ``evicted``: a session limit closed it early to make room for a new turn;
- ``expired``: its session was idle past ``session_ttl_seconds``.

Closing a turn (``close``) takes it out of the open turns and out of the state: no decision
reaches it any more (a late decision waits, and is dead-lettered as ``orphaned_decision``
when its session expires, as for any turn no longer in state) and it never changes again.
The step that closed it emits it, with its reason and ``final_after`` (``Outputs.closed``).
Its final record is its latest revision rendered again (``final_of``): the same bytes, since
a turn's revision is rendered from the turn alone.

Who keeps a closed turn until its final record is written: the worker's store
(``state/closed.py``), with its entries on the changelog, since the worker writes a final
record only once the checkpoint holding the closing is on the changelog
(``worker/final_records.py``). A crash before then leaves no final record, and the records
read again decide the closing afresh, in whatever order they come; a crash after it finds
the closed turn in the store and writes the same record again. So a turn's final record is
written once, and the only repeat is the identical record. Replay, with nothing to crash,
writes finals at once (``worker/pipeline.py``).

A session's next instant (``next_at``): the earliest of its turns' windows (its closed ones
too, which the store names) and its own expiry, by which a store files it for the tick
(``state/due.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from stream_app.core.policy import Policy
from stream_app.core.records import FinalReason, FinalTurn, Outputs
from stream_app.core.session import Closed, EmittedTurn, SessionState

WINDOW: FinalReason = "window"
EXPIRED: FinalReason = "expired"
EVICTED: FinalReason = "evicted"


def close(
    state: SessionState, key: str, reason: FinalReason, policy: Policy, out: Outputs
) -> EmittedTurn:
    """Closes the open turn ``key``, keeping the ``final_after`` its revisions carried: it
    leaves the state, emitted in ``out.closed``."""
    turn = state.turns[key]
    state.close_turn(key, (reason, turn.final_after(policy)))
    out.closed.append((state.session_id, turn))
    return turn


def close_all(state: SessionState, reason: FinalReason, policy: Policy, out: Outputs) -> int:
    """Closes every open turn, oldest first; how many."""
    keys = list(state.turns)
    for key in keys:
        close(state, key, reason, policy, out)
    return len(keys)


def final_of(session_id: str, turn: EmittedTurn) -> FinalTurn:
    """The final record of a closed turn of the session: its latest revision's value,
    rendered again."""
    assert turn.closed is not None, "only a closed turn is final"
    reason, final_after = turn.closed
    _, value = turn.rendered()
    return FinalTurn(
        session_id,
        turn.call_id,
        turn.revision,
        final_after,
        cast(FinalReason, reason),  # written from a FinalReason, read back as a str
        value,
    )


def started_again(state: SessionState) -> bool:
    """Whether the state is an expired session that went on (``SessionState.start_again``,
    its closed turns still to be written) and has applied nothing since: none of its own is
    left. Any record applied since has set an ``applied`` offset again."""
    return not state.applied and not state.turns


def next_at(state: SessionState, closed: Iterable[Closed], policy: Policy) -> float:
    """The session's next instant: when a tick next has work for it. The earliest of its
    turns' (``turns_at``: its open ones, and ``closed``, the (reason, final_after) of its
    closed turns still to be written) and its own expiry (the end of its idle time): every
    session has one, so one index, read up to now, is the only timer a worker needs."""
    return next_at_of(state.last_seen, closed, _oldest_emitted(state), policy)


def expires_at(state: SessionState, policy: Policy) -> float:
    """When the session expires if nothing more arrives: the part of ``next_at`` that moves
    later with every record (a store may leave its index entry early for it)."""
    return state.last_seen + policy.session_ttl_seconds


def next_at_of(
    last_seen: float,
    closed: Iterable[tuple[str, float]],
    oldest_emitted: float | None,
    policy: Policy,
) -> float:
    """``next_at`` from its parts, as a stored head holds them too (``state/due.refile``):
    when the session was last seen, its closed turns' (reason, final_after), and when its
    oldest open turn was emitted."""
    at = last_seen + policy.session_ttl_seconds
    turns = turns_at(closed, oldest_emitted, policy)
    return at if turns is None or turns > at else turns


def turns_at(
    closed: Iterable[tuple[str, float]], oldest_emitted: float | None, policy: Policy
) -> float | None:
    """When a tick next has work for the session's turns (None: none): at once for a turn
    closed early and not yet written, else when the oldest of its turns closed by their
    window or still open passes ``final_after``.

    A turn closed by its window keeps its own instant (already past), so closing it moves
    nothing: only the next turn, once it is written, does.
    """
    at: float | None = None
    for reason, final_after in closed:
        instant = float(final_after) if reason == WINDOW else 0.0
        if instant == 0.0:
            return instant
        at = instant if at is None else min(at, instant)
    if oldest_emitted is not None:
        instant = float(oldest_emitted) + policy.late_decision_window_seconds
        at = instant if at is None else min(at, instant)
    return at


def _oldest_emitted(state: SessionState) -> float | None:
    oldest = next(iter(state.turns.values()), None)
    return None if oldest is None else oldest.emitted_at


@dataclass(frozen=True, slots=True)
class Timing:
    """The core's rule for a session's next instant under one policy, handed to a store
    (``state/``, which keeps no timing rule of its own) to file its sessions by it."""

    policy: Policy

    def next_at(self, state: SessionState, closed: Iterable[Closed]) -> float:
        return next_at(state, closed, self.policy)

    def expires_at(self, state: SessionState) -> float:
        return expires_at(state, self.policy)

    def next_at_of(
        self,
        last_seen: float,
        closed: Iterable[tuple[str, float]],
        oldest_emitted: float | None,
    ) -> float:
        return next_at_of(last_seen, closed, oldest_emitted, self.policy)


def view(
    state: SessionState, closed: Iterable[EmittedTurn], policy: Policy
) -> list[dict[str, object]]:
    """Which of the session's turns are final, for ``/sessions/{id}``: each open turn (not
    final; ``final_after`` says when it will be), then each ``closed`` one still to be
    written (final, its record being written). A turn in neither had its final record
    written."""
    rows: list[dict[str, object]] = [
        {
            "inference_call_id": turn.call_id,
            "revision": turn.revision,
            "final": False,
            "final_after": turn.final_after(policy),
        }
        for turn in state.turns.values()
    ]
    for turn in closed:
        assert turn.closed is not None
        reason, final_after = turn.closed
        rows.append(
            {
                "inference_call_id": turn.call_id,
                "revision": turn.revision,
                "final": True,
                "final_after": final_after,
                "final_reason": reason,
                "written": False,
            }
        )
    return rows

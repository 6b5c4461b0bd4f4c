"""What waits too long, as a tick reports it: nothing a producer got wrong waits in silence.

A pending message waits for a finishing message (an assistant message with a
``finishReason``) to make it part of a turn; a decision waits for a turn its ``call_id``
names. Either may never come (a misspelt field, a lost record), and then they wait until
their session expires. Each head says when the oldest of each kind arrived
(``state/entries.py``), and the store keeps that of the sessions with something waiting
(``TableSessions.waits``: from the heads it writes, and those read when a partition is
assigned), so a tick counts the sessions whose oldest has waited past a threshold, and
names those that crossed it since the partition's previous report, once each, without a
pass over every head.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from stream_app.core.session import SessionState

Kind = Literal["messages", "decisions"]
MESSAGES: Kind = "messages"
DECISIONS: Kind = "decisions"
# What a log line says of each kind: why they wait.
HINTS: dict[Kind, str] = {
    MESSAGES: "no assistant message with finishReason has closed them into a turn",
    DECISIONS: "no turn has the inference_call_id or tool-call id their call_id names",
}
NAMED = 20  # crossings a report names at most; the rest are counted (a flood is one line)


@dataclass(slots=True)
class Past:
    """The sessions of one kind waiting past the threshold, and the age of the oldest."""

    sessions: int = 0
    oldest: float = 0.0  # seconds; 0 when none


@dataclass(slots=True)
class Crossing:
    """A session whose oldest message or decision crossed the threshold since the last report."""

    session_id: str
    kind: Kind
    waiting: int  # how many of the kind wait in the session
    age: float  # seconds the oldest has waited, at the report


@dataclass(slots=True)
class WaitingSweep:
    """What one report of one partition finds waiting at ``now`` (named for the sweep over
    every head that made it before issue 50; a tick makes it now).

    Past the threshold: arrived at least ``threshold`` seconds before ``now``. Crossed: past
    it now and not at ``since``, the partition's previous report, so that each crossing is
    named by one report only; the first report of a partition (``since`` None: after a start
    or an assignment) names every one past it."""

    threshold: float
    now: float
    since: float | None = None
    messages: Past = field(default_factory=Past)
    decisions: Past = field(default_factory=Past)
    crossed: list[Crossing] = field(default_factory=list)  # the first ``NAMED``
    unnamed: int = 0  # crossings past those

    def see(self, session_id: str, kind: Kind, arrived: float, waiting: int) -> None:
        """A session whose oldest of ``kind`` arrived at ``arrived`` (``waiting`` of them)."""
        crosses = arrived + self.threshold
        if crosses > self.now:
            return
        past = self.messages if kind == MESSAGES else self.decisions
        age = self.now - arrived
        past.sessions += 1
        past.oldest = max(past.oldest, age)
        if self.since is not None and crosses <= self.since:
            return  # named by an earlier report
        if len(self.crossed) < NAMED:
            self.crossed.append(Crossing(session_id, kind, waiting, age))
        else:
            self.unnamed += 1

    def see_waits(
        self, session_id: str, pending: tuple[float, int] | None, waiting: tuple[float, int] | None
    ) -> None:
        """A session by what its head says waits: (when the oldest arrived, how many) of its
        pending messages and of its decisions waiting for their turn (None: none)."""
        if pending is not None:
            self.see(session_id, MESSAGES, *pending)
        if waiting is not None:
            self.see(session_id, DECISIONS, *waiting)

    def see_state(self, state: SessionState) -> None:
        """A decoded session (one the store holds in memory, newer than its head)."""
        if (pending := state.messages_wait) is not None:
            self.see(state.session_id, MESSAGES, *pending)
        if (waiting := state.decisions_wait) is not None:
            self.see(state.session_id, DECISIONS, *waiting)

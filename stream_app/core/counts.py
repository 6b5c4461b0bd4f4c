"""What the core counts: one vocabulary for the worker's metrics and replay's summary.

Each name is a ``str`` (a ``StrEnum``), so a count reads the same by member or by its text
(``out.counts[Count.TURNS_EMITTED] == out.counts["turns_emitted"]``);
``observability/metrics.py`` maps each member to its series once.
"""

from __future__ import annotations

from collections import Counter
from enum import StrEnum

from stream_app.models.dead_letter import Reason


class Count(StrEnum):
    TURNS_EMITTED = "turns_emitted"
    TURN_REVISIONS = "turn_revisions"
    DUPLICATE_MESSAGE = "duplicate:message"
    DUPLICATE_DECISION = "duplicate:decision"
    DUPLICATE_FINAL = "duplicate:final"  # a finishing message for a turn already final
    REPROCESSED = "reprocessed"  # read again after a restart, already applied
    OFFSETS_RESTARTED = "offsets_restarted"  # a record below the applied offset, yet new
    PARTS_SKIPPED = "parts_skipped"  # content parts of a kind the contract has not
    MALFORMED_TOOL_ARGUMENTS = "malformed_tool_arguments"  # emitted as {}
    SESSIONS_EXPIRED = "sessions_expired"
    PENDING_MESSAGES_EXPIRED = "pending_messages_expired"  # with their idle session
    PENDING_REPLACED = "pending_replaced"  # a pending copy replaced by a later one, in place
    HELD_BY_TOO_LARGE = "held_by_too_large"  # records a turn_too_large dead letter took along
    TURNS_CLOSED = "turns_closed"  # past the late-decision window
    TURNS_CLOSED_EARLY = "turns_closed_early"  # past the open-turn limits
    IDENTITIES_FORGOTTEN = "identities_forgotten"  # past the remembered-identity limit
    FINAL_KEYS_FORGOTTEN = "final_keys_forgotten"  # past the final-key limit, early
    SESSIONS_IN_STATE = "sessions_in_state"  # replay's, at its end
    # A record of <id>-sessions in a newer format than this worker's (another release's,
    # during a rolling update): ignored, never a dead letter (worker/worker.py, INTERNAL_FORMAT).
    INTERNAL_NEWER = "internal_ignored:newer_version"
    # One member a dead-letter reason, DEAD_LETTER_<NAME> = "dead_letter:<value>", made from
    # ``Reason`` itself: a new reason is counted (and has its metric) with no edit here.
    _ignore_ = "_members _reason"
    _members = vars()
    for _reason in Reason:
        _members[f"DEAD_LETTER_{_reason.name}"] = f"dead_letter:{_reason.value}"

    @staticmethod
    def dead_letter(reason: Reason) -> Count:
        return Count(f"dead_letter:{reason.value}")

    @property
    def reason(self) -> Reason | None:
        """The dead-letter reason this count is of, if it is one."""
        head, _, tail = self.value.partition(":")
        return Reason(tail) if head == "dead_letter" else None


class Counts(Counter[Count]):
    """A ``Counter`` that starts empty without a call: ``Counter()`` runs its ``update`` in
    Python even with nothing to count, and every record makes one."""

    __slots__ = ()

    def __init__(self) -> None:
        pass  # dict.__new__ made it empty: nothing to update

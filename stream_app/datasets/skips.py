"""Why a turn is not written: each format's closed list of reasons, and the counts the
manifest gives."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypedDict

from stream_app.datasets.options import Format

MAX_LISTED = 1_000  # skipped turns the manifest names one by one (the counts are complete)


class SkipReason(StrEnum):
    """Why a turn was not written. Each format counts by its own closed list (:data:`SKIPS`)."""

    # The record is not a turn line: not JSON, no key, a key that is not the JSON text of
    # [session_id, inference_call_id] naming the value's call, a value that is not a Turn v1
    # or whose messages hold no single assistant message with a finish reason.
    NOT_A_TURN = "not_a_turn"
    # An id (the key's, a tool call's, a decision's) with NUL or a lone surrogate: no
    # dataset file or trainer's tokenizer holds it as it is.
    UNREPRESENTABLE_UNICODE = "unrepresentable_unicode"
    # NaN or an infinity, which JSON does not have (a line written by Python's json).
    NON_FINITE_NUMBER = "non_finite_number"
    # The line, or the example written of it, is larger than --max-example-bytes.
    TOO_LARGE = "too_large"
    # A tool result answers a tool call that no earlier message of its session makes: the
    # turn that made the call is not in the input.
    MISSING_EARLIER_TURN = "missing_earlier_turn"
    # A conversation the chat format cannot hold: a tool call not answered before the next
    # message of another role, a call answered twice, a tool message that answers no call,
    # or tool calls (or tool results) in a message whose role cannot carry them.
    BROKEN_TOOL_LOOP = "broken_tool_loop"
    # Another turn of its session was skipped for one of the reasons above: an earlier one,
    # whose messages this turn's history needs (trajectories: any).
    SESSION_BROKEN = "session_broken"
    # chat --only-accepted: the turn has no explicit accept, or has a reject.
    NOT_ACCEPTED = "not_accepted"
    # chat: an example already written, the same history and answer, from another session
    # (a session forked from another, or resumed, sends the other's turns again).
    DUPLICATE_EXAMPLE = "duplicate_example"
    # kto, dpo: no explicit decision (implicit ones count only with --include-implicit).
    NO_VERDICT = "no_verdict"
    # kto, dpo: an accept and a reject of the same kind (explicit, or implicit alone).
    CONFLICTING_VERDICTS = "conflicting_verdicts"
    # dpo, in no pair, and none of the two below: no turn of the other verdict shares its
    # prompt, or each that answered otherwise is in another pair.
    UNPAIRED = "unpaired"
    # dpo: every turn of the other verdict with its prompt answered exactly as it did.
    IDENTICAL_RESPONSES = "identical_responses"
    # dpo: not identical_responses, and its prompt has MAX_PAIRS pairs.
    PAIR_LIMIT = "pair_limit"


_R = SkipReason
_READ = (_R.NOT_A_TURN, _R.UNREPRESENTABLE_UNICODE, _R.NON_FINITE_NUMBER, _R.TOO_LARGE)
_HISTORY = (*_READ, _R.MISSING_EARLIER_TURN, _R.BROKEN_TOOL_LOOP, _R.SESSION_BROKEN)
_VERDICT = (_R.NO_VERDICT, _R.CONFLICTING_VERDICTS)
SKIPS: dict[Format, tuple[SkipReason, ...]] = {
    "turns": _READ,
    "trajectories": _HISTORY,
    "chat": (*_HISTORY, _R.NOT_ACCEPTED, _R.DUPLICATE_EXAMPLE),
    "kto": (*_HISTORY, *_VERDICT),
    "dpo": (*_HISTORY, *_VERDICT, _R.UNPAIRED, _R.IDENTICAL_RESPONSES, _R.PAIR_LIMIT),
}
# Reasons a turn is skipped for what it is, named one by one in the manifest.
_NAMED = {*_READ, _R.MISSING_EARLIER_TURN, _R.BROKEN_TOOL_LOOP}


class SkippedTurn(TypedDict):
    key: str | None  # None: the record had no readable key
    reason: SkipReason


@dataclass(slots=True)
class Skips:
    """Skipped turns: counted by reason, and the first ``MAX_LISTED`` of them named (those
    skipped for what they are, not for a filter or a sibling)."""

    counts: Counter[SkipReason] = field(default_factory=Counter)
    listed: list[SkippedTurn] = field(default_factory=list)
    redacted: int = 0  # credentials replaced in what was written (REDACTED markers added)

    def add(self, key: str | None, reason: SkipReason) -> None:
        self.counts[reason] += 1
        if reason in _NAMED and len(self.listed) < MAX_LISTED:
            if key is not None:  # a lone surrogate named as its escape: the manifest is UTF-8
                key = key.encode("utf-8", "backslashreplace").decode("utf-8")
            self.listed.append({"key": key, "reason": reason})

    def as_counts(self, form: Format = "chat") -> dict[str, int]:
        """Every reason of the format's closed list, in its order, with its count (0 too)."""
        return {reason.value: self.counts[reason] for reason in SKIPS[form]}

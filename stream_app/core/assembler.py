"""Where a Turn is built (SPEC §4): one session's state + one input → new state + emissions.

Messages gather in the session until an assistant message with a finish reason completes
an inference call; that call becomes a Turn. Decisions join turns by ``call_id`` under the
turn's ``inference_call_id`` or any of its tool-call ids, whichever arrives first, and only
when exactly one turn answers to that id (unique-or-drop).

The state passed in is owned by the call: it is updated and returned, never shared. A
source record applied once is never applied again, so a worker that reads again from its
last committed offset after a crash changes nothing it had already done.
"""

from __future__ import annotations

from stream_app.core.collapse import Collapse, first_copy
from stream_app.core.completion import render_completion
from stream_app.core.dead_letter import dead_letter
from stream_app.core.expiry import due, expire
from stream_app.core.policy import Policy
from stream_app.core.records import (
    Outputs,
    SessionDecision,
    SessionInput,
    SessionMessage,
    TurnRevision,
)
from stream_app.core.session import EmittedTurn, PendingMessage, SessionState, StoredDecision
from stream_app.models.dead_letter import Reason
from stream_app.models.timestamps import format_utc, instant_ns


def apply(
    state: SessionState | None,
    item: SessionInput,
    policy: Policy,
    now: float,
    collapse: Collapse,
) -> tuple[SessionState, Outputs]:
    out = Outputs()
    if state is not None and due(state, policy, now):
        state, expired = expire(state, policy, now)
        if state is None:
            collapse.forget(item.session_id)
        if expired.counts:
            out.extend(expired)
    if state is None:
        state = SessionState(item.session_id, now)
    state.last_seen = now
    topic, partition, offset = item.source
    position = f"{topic}:{partition}"
    if offset <= state.applied.get(position, -1):
        out.outcome = "duplicate"
        out.counts["reprocessed"] += 1
        return state, out
    state.applied[position] = offset
    if isinstance(item, SessionMessage):
        _add_message(state, item, policy, now, out)
    else:
        _add_decision(state, item, collapse, policy, now, out)
    return state, out


def _add_message(
    state: SessionState, item: SessionMessage, policy: Policy, now: float, out: Outputs
) -> None:
    call_id = item.inference_call_id
    if (item.identity is not None and item.identity in state.seen_messages) or (
        call_id is not None and "call:" + call_id in state.seen_messages
    ):
        out.outcome = "duplicate"
        out.counts["duplicate:message"] += 1
        return
    out.outcome = "contributed"
    arrived = PendingMessage(item.identity, item.sequence, item.message)
    for i, pending in enumerate(state.pending):
        if item.identity is not None and pending.identity == item.identity:
            state.pending[i] = arrived  # the final copy of a streamed message
            break
    else:
        state.pending.append(arrived)
    if call_id is not None:
        _complete_turn(state, call_id, item, policy, now, out)


def _complete_turn(
    state: SessionState,
    call_id: str,
    final: SessionMessage,
    policy: Policy,
    now: float,
    out: Outputs,
) -> None:
    pending = state.pending
    if all(p.sequence is not None for p in pending):
        pending = sorted(pending, key=lambda p: p.sequence or 0)
    tool_calls = [part for part in final.message["parts"] if part["type"] == "tool_call"]
    turn = EmittedTurn(
        body={
            "new_messages": [p.message for p in pending],
            "completion": render_completion(final.message),
            "inference_call_id": call_id,
            "tool_calls": tool_calls,
        },
        reach=list(dict.fromkeys([call_id, *(part["id"] for part in tool_calls)])),
        emitted_at=state.stamp(now),
    )
    state.seen_messages.update(p.identity for p in state.pending if p.identity is not None)
    state.seen_messages.add("call:" + call_id)
    state.pending = []

    # An id this turn shares with an earlier turn no longer names one turn: decisions
    # joined through it were joined on a guess, so they leave that turn for the DLQ.
    revised: dict[str, EmittedTurn] = {}
    for rid in turn.reach:
        for other in state.turns_reaching(rid):
            for d in [d for d in other.decisions if d.call_id == rid]:
                other.decisions.remove(d)
                revised[other.body["inference_call_id"]] = other
                _ambiguous(state, d, [other, turn], now, out)
    state.add_turn(turn)

    still_waiting = []
    for d in state.waiting:
        if d.call_id not in turn.reach:
            still_waiting.append(d)
        elif len(reached := state.turns_reaching(d.call_id)) > 1:
            _ambiguous(state, d, reached, now, out)
        else:
            turn.decisions.append(d)
    state.waiting = still_waiting

    out.turns.append(
        TurnRevision(state.session_id, turn.render(), True, turn.revision, turn.final_after(policy))
    )
    out.counts["turns_emitted"] += 1
    for other in revised.values():
        _revise(state, other, policy, out)


def _add_decision(
    state: SessionState,
    item: SessionDecision,
    collapse: Collapse,
    policy: Policy,
    now: float,
    out: Outputs,
) -> None:
    sibling = item.codex_sibling
    pathless = item.decision["file_path"] == ""
    session_id = state.session_id
    decision_id = item.decision["decision_id"]
    this = first_copy(decision_id, item.source)
    keys = [item.natural_key, sibling] if sibling is not None and pathless else [item.natural_key]
    if any((first := collapse.first(session_id, k)) is not None and first != this for k in keys):
        out.outcome = "duplicate"
        out.counts["duplicate:decision"] += 1
        return
    collapse.remember(session_id, item.natural_key, this)
    if sibling is not None and not pathless:
        collapse.remember(session_id, sibling, this)

    decision = dict(item.decision)
    if decision["captured_at"] is None:
        decision["captured_at"] = format_utc(now)  # first store wins; copies are collapsed
    stored = StoredDecision(
        decision, (instant_ns(decision["occurred_at"]), decision["decision_id"]), item.origin
    )
    if decision["call_id"] is None:
        out.outcome = "dead_lettered"
        out.dead_letters.append(
            dead_letter(
                item.origin,
                Reason.UNATTRIBUTABLE_DECISION,
                "call_id: is null, so the decision can join no turn",
                now,
            )
        )
        out.counts[f"dead_letter:{Reason.UNATTRIBUTABLE_DECISION.value}"] += 1
        return

    reached = state.turns_reaching(stored.call_id)
    if len(reached) > 1:
        out.outcome = "dead_lettered"
        _ambiguous(state, stored, reached, now, out)
    elif reached:
        out.outcome = "contributed"
        reached[0].decisions.append(stored)
        _revise(state, reached[0], policy, out)
    else:
        out.outcome = "contributed"
        state.waiting.append(stored)


def _revise(state: SessionState, turn: EmittedTurn, policy: Policy, out: Outputs) -> None:
    turn.revision += 1
    out.turns.append(
        TurnRevision(
            state.session_id, turn.render(), False, turn.revision, turn.final_after(policy)
        )
    )
    out.counts["turn_revisions"] += 1


def _ambiguous(
    state: SessionState, d: StoredDecision, turns: list[EmittedTurn], now: float, out: Outputs
) -> None:
    names = ", ".join(repr(t.body["inference_call_id"]) for t in turns)
    error = (
        f"call_id: {d.call_id!r} reaches {len(turns)} turns of session "
        f"{state.session_id!r} ({names})"
    )
    out.dead_letters.append(dead_letter(d.origin, Reason.AMBIGUOUS_DECISION, error, now))
    out.counts[f"dead_letter:{Reason.AMBIGUOUS_DECISION.value}"] += 1

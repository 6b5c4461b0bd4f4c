"""Where a Turn is built (SPEC §4): one session's state + one input → new state + emissions.

Messages gather in the session until an assistant message with a finish reason completes
an inference call; that call becomes a Turn. Decisions join turns by ``call_id`` under the
turn's ``inference_call_id`` or any of its tool-call ids, whichever arrives first, and only
when exactly one turn answers to that id (unique-or-drop).

The state passed in is owned by the call: it is updated and returned, never shared. A
source record applied once is never applied again, so a worker that reads again from its
last committed offset after a crash changes nothing it had already done.

Every per-session structure has a limit (``Policy``, SPEC §6): a record that would cross
one is a ``session_limit`` dead letter naming the limit and the session, and the session
goes on. Each step looks up what it needs through the state's indexes: a record costs the
same whatever its session holds, but for what it emits.
"""

from __future__ import annotations

from collections.abc import Collection
from operator import attrgetter

from stream_app.core import finality
from stream_app.core.collapse import (
    CONFLICT,
    PATHLESS,
    RELEASED,
    CollapseWrites,
    Firsts,
    conflicted,
    decision_key,
    first_copy,
    resend,
)
from stream_app.core.completion import render_completion
from stream_app.core.counts import Count
from stream_app.core.dead_letter import dead_letter, turn_too_large
from stream_app.core.expiry import expire, expiring
from stream_app.core.policy import Policy
from stream_app.core.records import (
    Origin,
    Outputs,
    SessionDecision,
    SessionInput,
    SessionMessage,
    TurnRevision,
)
from stream_app.core.session import EmittedTurn, PendingMessage, SessionState, StoredDecision
from stream_app.models.dead_letter import Reason
from stream_app.models.timestamps import format_utc, instant_ns
from stream_app.models.turn import InferenceMessageDict, ToolCallDict

_SEQUENCE = attrgetter("sequence")

# What a turn takes of its completing message: the completion, the tool calls, their ids.
TurnParts = tuple[str, list[ToolCallDict], list[str]]


def apply(
    state: SessionState | None,
    item: SessionInput,
    policy: Policy,
    now: float,
    firsts: Firsts,
    out: Outputs | None = None,
    already_final: bool = False,
    closed: Collection[str] = (),
) -> tuple[SessionState, Outputs, CollapseWrites]:
    """``firsts``: the collapse's first copies of the item's ``collapse_keys`` (a message
    has none), read before the step; the writes it makes to the collapse are returned, for
    the shell to make after it. ``out``: what the record's walk has produced so far (what
    decoding it counted), so that one record has one ``Outputs`` from intake to the
    producer; new when None. ``already_final``: a finishing message's turn key went final
    before (the store's final keys, read before the step): a second, different final
    record under it must never be made, so the message is a duplicate. ``closed``: the
    session's turns closed before and whose final records are still to be written (the
    shell keeps them, ``state/closed.py``), by inference_call_id: a finishing message of one
    is a duplicate, and an expiry keeps the session for them."""
    out = Outputs() if out is None else out
    writes = CollapseWrites()
    if state is not None and expiring(state, policy, now):
        state, expired = expire(state, policy, now, bool(closed))
        if state is None or expired.counts[Count.SESSIONS_EXPIRED]:
            writes.forget = True
            firsts = {}  # forgotten with the session
        if expired.closed:
            closed = {*closed, *(turn.call_id for _, turn in expired.closed)}
        if expired.counts or expired.closed:
            out.extend(expired)
    if state is None:
        state = SessionState(item.session_id, now)
    state.last_seen = now
    origin = item.origin
    position, offset = f"{origin.source_topic}:{origin.partition}", origin.offset
    if offset <= state.applied.get(position, -1):
        if not _offsets_started_again(state, position, item.timestamp):
            out.outcome = "duplicate"
            out.counts[Count.REPROCESSED] += 1
            return state, out, writes
        out.counts[Count.OFFSETS_RESTARTED] += 1
    state.applied[position] = offset
    if item.timestamp is not None:
        state.applied_at[position] = max(item.timestamp, state.applied_at.get(position, 0.0))
    if isinstance(item, SessionMessage):
        if already_final:
            out.outcome = "duplicate"
            out.counts[Count.DUPLICATE_FINAL] += 1
            return state, out, writes
        _add_message(state, item, policy, now, out, closed)
    else:
        _add_decision(state, item, firsts, writes, policy, now, out)
    return state, out, writes


def _offsets_started_again(state: SessionState, position: str, timestamp: float | None) -> bool:
    """Whether a record at or below the session's applied offset of its partition is new:
    its topic was made again, or the cluster moved, and offsets started again.

    Every record applied from the partition had a timestamp at most ``applied_at``, so one
    read again after a restart has too; a record stamped later cannot have been applied.
    (A new record stamped no later than the last one applied is still taken for one read
    again: producers' clocks decide, and the offsets of a log never go back otherwise.)"""
    newest = state.applied_at.get(position)
    return timestamp is not None and newest is not None and timestamp > newest


def _session_limit(
    state: SessionState, origin: Origin, problem: str, now: float, out: Outputs
) -> None:
    out.outcome = "dead_lettered"
    error = f"session {state.session_id!r}: {problem}"
    out.dead_letters.append(dead_letter(origin, Reason.SESSION_LIMIT, error, now))
    out.counts[Count.dead_letter(Reason.SESSION_LIMIT)] += 1


def _add_message(
    state: SessionState,
    item: SessionMessage,
    policy: Policy,
    now: float,
    out: Outputs,
    closed: Collection[str],
) -> None:
    call_id = item.inference_call_id
    seen = state.seen_messages
    if (item.identity is not None and item.identity in seen) or (
        call_id is not None
        and ("call:" + call_id in seen or call_id in state.turns or call_id in closed)
    ):
        out.outcome = "duplicate"
        out.counts[Count.DUPLICATE_MESSAGE] += 1
        return
    if call_id is None and (problem := _pending_limit(state, item, policy)) is not None:
        _session_limit(state, item.origin, problem, now, out)
        return
    # What the turn takes of the completing message is read before the session changes: a
    # message that cannot make a turn fails here, leaving the session as it was.
    made = None if call_id is None else _turn_of(item.message)
    out.outcome = "contributed"
    if state.pending_with(item.identity) is not None:
        out.counts[Count.PENDING_REPLACED] += 1  # its copy leaves every output: replay's sum
    state.add_pending(
        PendingMessage(
            item.identity, item.sequence, item.message, item.size, _json=item.json or None
        ),
        now,
    )
    if call_id is not None and made is not None:
        _complete_turn(state, call_id, made, item, policy, now, out)


def _turn_of(message: InferenceMessageDict) -> TurnParts:
    """A completing message's completion, tool calls and the ids a decision may name."""
    tool_calls = [part for part in message["parts"] if part["type"] == "tool_call"]
    return render_completion(message), tool_calls, [str(part["id"]) for part in tool_calls]


def _pending_limit(state: SessionState, item: SessionMessage, policy: Policy) -> str | None:
    """Why the session cannot take one more pending message, if it cannot. A message that
    completes a turn always enters: it leaves the pending list empty."""
    if (
        len(state.pending_messages) < policy.max_pending_messages
        and state.pending_bytes + item.size <= policy.max_pending_bytes
    ):
        return None  # room for it, whichever copy it replaces
    replaced = state.pending_with(item.identity)
    if replaced is None and len(state.pending_messages) >= policy.max_pending_messages:
        return (
            f"already holds {len(state.pending_messages)} pending messages, the limit "
            f"(max_pending_messages {policy.max_pending_messages}); no turn has completed them"
        )
    held = state.pending_bytes - (0 if replaced is None else replaced.size)
    if held + item.size > policy.max_pending_bytes:
        return (
            f"{held} bytes of pending messages and this message's {item.size} would pass "
            f"the limit (max_pending_bytes {policy.max_pending_bytes})"
        )
    return None


def _complete_turn(
    state: SessionState,
    call_id: str,
    made: TurnParts,
    final: SessionMessage,
    policy: Policy,
    now: float,
    out: Outputs,
) -> None:
    completion, tool_calls, tool_ids = made
    unsequenced = state.unsequenced
    pending = state.take_pending()
    if not unsequenced:
        pending.sort(key=_SEQUENCE)  # every one has a sequence
    turn = EmittedTurn(
        body={
            "new_messages": [p.message for p in pending],
            "completion": completion,
            "inference_call_id": call_id,
            "tool_calls": tool_calls,
        },
        reach=list(dict.fromkeys([call_id, *tool_ids])),
        emitted_at=state.stamp(now),
        messages_json=b"[" + b",".join([p.json() for p in pending]) + b"]",
    )
    limit = policy.max_remembered_identities
    identities = [p.identity for p in pending if p.identity is not None]
    identities.append("call:" + call_id)
    forgot = state.remember(identities, limit)
    if forgot:
        out.counts[Count.IDENTITIES_FORGOTTEN] += forgot

    # An id this turn shares with an earlier turn no longer names one turn: decisions
    # joined through it were joined on a guess, so they leave that turn for the DLQ.
    revised: dict[str, EmittedTurn] = {}
    for rid in turn.reach:
        for other in state.turns_reaching(rid):
            guessed = [d for d in other.decisions if d.call_id == rid]
            if guessed:
                other.decisions = [d for d in other.decisions if d.call_id != rid]
                revised[other.call_id] = other
            for d in guessed:
                state.drop_decision(d)
                _ambiguous(state, d, [other, turn], now, out)

    for d in state.take_waiting(turn.reach):
        if others := state.turns_reaching(d.call_id):
            state.drop_decision(d)
            _ambiguous(state, d, [*others, turn], now, out)
        elif len(turn.decisions) >= policy.max_turn_decisions:
            state.drop_decision(d)
            _session_limit(state, d.origin, _full(turn, policy), now, out)
        else:
            turn.decisions.append(d)

    revision = _revision(state, turn, True, policy, final.origin, now, out)
    if revision is None:  # too large for the turn topic: it cannot be revised either
        # What it held besides its finishing message goes with its dead letter.
        out.counts[Count.HELD_BY_TOO_LARGE] += len(pending) - 1 + len(turn.decisions)
        for d in turn.decisions:
            state.drop_decision(d)
    else:
        turn.size = len(revision.value)
        _close_oldest_for(state, turn, policy, out)
        state.add_turn(turn)
        out.turns.append(revision)
        out.counts[Count.TURNS_EMITTED] += 1
    for other in revised.values():
        _revise(state, other, policy, final.origin, now, out)


def _close_oldest_for(state: SessionState, turn: EmittedTurn, policy: Policy, out: Outputs) -> None:
    """Makes room for one more open turn: the oldest are closed early (as ``expire`` would
    close them later), so a decision for one of them waits and is orphaned, never lost."""
    closed = 0
    while state.turns and (
        len(state.turns) >= policy.max_open_turns
        or state.open_turn_bytes + turn.size > policy.max_open_turn_bytes
    ):
        finality.close(state, next(iter(state.turns)), finality.EVICTED, policy, out)
        closed += 1
    if closed:
        out.counts[Count.TURNS_CLOSED_EARLY] += closed


def _add_decision(
    state: SessionState,
    item: SessionDecision,
    firsts: Firsts,
    writes: CollapseWrites,
    policy: Policy,
    now: float,
    out: Outputs,
) -> None:
    decision = item.decision
    decision_id, call_id = decision["decision_id"], decision["call_id"]
    sibling = item.codex_sibling
    pathless = decision["file_path"] == ""
    this = first_copy(decision_id, item.source)
    first = firsts.get(item.natural_key)
    held = None if sibling is None else firsts.get(sibling)  # a copy with the path, or a resend
    with_path = held is not None and not held.startswith(PATHLESS)
    # A record that finds itself (``first_copy``) was applied when first read: what later
    # records wrote to the collapse before the worker stopped must not change its fate.
    if (first is not None and first != this) or (pathless and with_path and first is None):
        out.outcome = "duplicate"  # a copy of an act applied, or a resend of a copy with a path
        out.counts[Count.DUPLICATE_DECISION] += 1
        return

    # A copy with a path replaces the pathless resends of it that came first (SPEC §3's Codex
    # rule, in either order): it takes their place, so it needs no room of its own.
    resends: list[StoredDecision] = []
    same: set[str] = set()  # first copies of this act under other records
    if sibling is not None and not pathless:
        resends = state.resends_of(sibling)
        same = {first_copy(r.decision["decision_id"], r.source) for r in resends}
        if held is not None and not with_path:
            same.add(held[len(PATHLESS) :])  # the first resend, held or not
    elif held is not None and with_path:
        same.add(held)  # a resend read again, its copy with the path applied after it
    named = decision_key(decision_id)
    conflict, other, claim = _claim(state, decision_id, firsts.get(named), this, same, resends)
    reached = [] if call_id is None else state.turns_reaching(call_id)
    if not conflict and not resends:
        if len(reached) == 1 and len(reached[0].decisions) >= policy.max_turn_decisions:
            _session_limit(state, item.origin, _full(reached[0], policy), now, out)
            return
        waiting = len(state.waiting_decisions)
        if call_id is not None and not reached and waiting >= policy.max_waiting_decisions:
            problem = (
                f"already holds {waiting} decisions waiting for their turn, the limit "
                f"(max_waiting_decisions {policy.max_waiting_decisions})"
            )
            _session_limit(state, item.origin, problem, now, out)
            return

    writes.remember.append((item.natural_key, this))
    if sibling is not None and (held is None or (not pathless and not with_path)):
        writes.remember.append((sibling, resend(this) if pathless else this))
    if claim is not None:
        writes.remember.append((named, claim))
    revised: dict[str, EmittedTurn] = {}  # the turns to emit again, once each
    for r in resends:  # now counted duplicates, their ids no act's of their own
        if (left := state.take_out(r)) is not None:
            revised[left.call_id] = left
        out.replaced.append(r.source)
        out.counts[Count.DUPLICATE_DECISION] += 1
        if r.decision["decision_id"] != decision_id:
            writes.remember.append((decision_key(r.decision["decision_id"]), RELEASED))
    if other is not None:  # the act first under the id, held: it leaves
        if (left := state.take_out(other)) is not None:
            revised[left.call_id] = left
        _conflicting(state, other.origin, decision_id, now, out)

    if call_id is None:
        out.outcome = "dead_lettered"
        out.dead_letters.append(
            dead_letter(
                item.origin,
                Reason.UNATTRIBUTABLE_DECISION,
                "call_id: is null, so the decision can join no turn",
                now,
            )
        )
        out.counts[Count.dead_letter(Reason.UNATTRIBUTABLE_DECISION)] += 1
    elif conflict:
        out.outcome = "dead_lettered"
        _conflicting(state, item.origin, decision_id, now, out)
    else:
        decision = decision.copy()
        if decision["captured_at"] is None:
            decision["captured_at"] = format_utc(now)  # first store wins; copies are collapsed
        stored = StoredDecision(
            decision, (instant_ns(decision["occurred_at"]), decision_id), item.origin
        )
        if len(reached) > 1:
            out.outcome = "dead_lettered"
            _ambiguous(state, stored, reached, now, out)
        elif reached:
            out.outcome = "contributed"
            state.store_decision(stored)
            reached[0].decisions.append(stored)
            revised[reached[0].call_id] = reached[0]
        else:
            out.outcome = "contributed"
            state.add_waiting(stored, now)
    for turn in revised.values():
        _revise(state, turn, policy, item.origin, now, out)


def _claim(
    state: SessionState,
    decision_id: str,
    claim: str | None,
    this: str,
    same: set[str],
    resends: list[StoredDecision],
) -> tuple[bool, StoredDecision | None, str | None]:
    """Whether ``decision_id`` names another act of the session already (one decision_id,
    one act), the decision of that act the session holds (to take out), and what the
    collapse is to hold under the id now (None: as it is).

    ``claim``: what the collapse holds under the id. No other act: nothing, the record
    itself (read again), :data:`RELEASED`, or a copy of this act under another record
    (``same``: a Codex resend this copy replaces, or the copy with the path of this resend)."""
    other = state.held_with_id(decision_id)
    if other is not None and any(other is r for r in resends):
        other = None
    if claim is not None and claim.startswith(CONFLICT):  # the first act, read again, or not
        return claim[len(CONFLICT) :] != this or other is not None, other, None
    if claim is not None and claim != this and claim != RELEASED and claim not in same:
        return True, other, conflicted(claim)
    if other is not None:  # held, yet not in the collapse: state from before it held ids
        return True, other, conflicted(first_copy(decision_id, other.source))
    return False, None, None if claim == this else this


def _revision(
    state: SessionState,
    turn: EmittedTurn,
    first: bool,
    policy: Policy,
    cause: Origin,
    now: float,
    out: Outputs,
) -> TurnRevision | None:
    """The turn's next revision, or None and its ``turn_too_large`` dead letter: a Turn
    over ``max_turn_bytes`` is one no consumer with Kafka's default limits could read."""
    number = turn.revision if first else turn.revision + 1
    rendered, value = turn.rendered()
    revision = TurnRevision(
        state.session_id, rendered, first, number, turn.final_after(policy), value
    )
    if len(revision.value) <= policy.max_turn_bytes:
        return revision
    problem = f"over the {policy.max_turn_bytes}-byte limit of a turn"
    source = (cause.source_topic, cause.partition, cause.offset)
    out.dead_letters.append(turn_too_large(revision, source, problem, now))
    out.counts[Count.dead_letter(Reason.TURN_TOO_LARGE)] += 1
    return None


def _revise(
    state: SessionState,
    turn: EmittedTurn,
    policy: Policy,
    cause: Origin,
    now: float,
    out: Outputs,
) -> None:
    sent = turn.entry  # its entry as last emitted: a decision joined since has a later one
    state.changed_turn(turn)
    revision = _revision(state, turn, False, policy, cause, now, out)
    if revision is None:
        # Dead-lettered with the revision they would have made: the decisions joined since
        # leave the turn, so it stays what its revisions say (its final record is its latest
        # revision, ``core/finality.py``); what is left, less any decision taken out, is
        # emitted under the number.
        added = [d for d in turn.decisions if d.entry > sent]
        if not added:
            turn.revision += 1  # its number stays unused (``TurnRevision.revision``)
            return
        out.outcome = "dead_lettered"
        turn.decisions = [d for d in turn.decisions if d.entry < sent]
        for d in added:
            state.drop_decision(d)
        revision = _revision(state, turn, False, policy, cause, now, out)
        if revision is None:
            turn.revision += 1
            return
    turn.revision = revision.revision
    out.turns.append(revision)
    out.counts[Count.TURN_REVISIONS] += 1


def _full(turn: EmittedTurn, policy: Policy) -> str:
    return (
        f"turn {turn.call_id!r} already has {len(turn.decisions)} decisions, the limit "
        f"(max_turn_decisions {policy.max_turn_decisions})"
    )


def _ambiguous(
    state: SessionState, d: StoredDecision, turns: list[EmittedTurn], now: float, out: Outputs
) -> None:
    """``d`` no longer joins a turn; a stored decision is dropped by the caller first."""
    names = ", ".join(repr(t.call_id) for t in turns)
    error = (
        f"call_id: {d.call_id!r} reaches {len(turns)} turns of session "
        f"{state.session_id!r} ({names})"
    )
    out.dead_letters.append(dead_letter(d.origin, Reason.AMBIGUOUS_DECISION, error, now))
    out.counts[Count.dead_letter(Reason.AMBIGUOUS_DECISION)] += 1


def _conflicting(
    state: SessionState, origin: Origin, decision_id: str, now: float, out: Outputs
) -> None:
    """A copy of one of two acts under one decision_id: it joins no turn (SPEC §4's
    unique-or-drop, for the id that names the decision)."""
    error = (
        f"decision_id: {decision_id!r} names two different decisions of session "
        f"{state.session_id!r} (they differ in what the developer did, or when); no copy "
        "under it joins a turn"
    )
    out.dead_letters.append(dead_letter(origin, Reason.AMBIGUOUS_DECISION, error, now))
    out.counts[Count.dead_letter(Reason.AMBIGUOUS_DECISION)] += 1

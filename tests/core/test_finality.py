"""SPEC §8 in the core: when a turn closes, why, and that its final record is its latest
revision byte for byte (``core/finality.py``), in replay's pipeline (finals written at once)."""

from __future__ import annotations

import dataclasses

import orjson

from stream_app.core import finality
from stream_app.core.policy import Policy
from stream_app.core.records import FinalTurn, Outputs
from stream_app.core.session import SessionState, closed_of_json
from stream_app.state.closed import closings
from tests.contracts import assert_valid_turn
from tests.factories import ORG, Run, assistant, decision, message, tool_call

WINDOW = 600.0


def finals(run: Run) -> list[FinalTurn]:
    return [f for out in run.outputs for f in out.finals]


def latest_values(run: Run) -> dict[bytes, bytes]:
    """The latest revision's value of each key, as the turn topic holds it."""
    return {r.key_bytes: r.value for out in run.outputs for r in out.turns}


def assert_finals_are_latest_revisions(run: Run) -> None:
    latest = latest_values(run)
    for final in finals(run):
        assert final.value == latest[final.key_bytes]
        assert_valid_turn(orjson.loads(final.value))
    keys = [f.key_bytes for f in finals(run)]
    assert len(keys) == len(set(keys)), "a turn went final twice"


def tick(run: Run) -> Outputs:
    out = run.pipeline.tick()
    run.outputs.append(out)
    return out


def test_a_turn_goes_final_when_its_window_has_passed_and_not_before() -> None:
    run = Run(policy=Policy(org_id=ORG, late_decision_window_seconds=WINDOW))
    emitted = run.now
    run.msg(message(text="q"))
    run.msg(assistant(message_id="a1", tool_calls=[tool_call("t1")]))
    run.dec(decision(call_id="t1"))  # a late decision: a second revision
    run.now += WINDOW
    assert tick(run).finals == []  # final after final_after, not at it
    run.now += 0.5
    (final,) = tick(run).finals
    assert (final.reason, final.revision, final.final_after) == ("window", 2, emitted + WINDOW)
    assert_finals_are_latest_revisions(run)
    headers = dict(final.headers)
    assert headers["final_reason"] == b"window" and headers["revision"] == b"2"
    assert headers["session_id"] == b"s1"
    # Nothing of it is left to revise: a decision for it now waits, and its session's
    # expiry dead-letters it (orphaned), never a silent drop.
    late = decision(call_id="t1", decision_id="d2", occurred_at="2026-01-01T10:05:00Z")
    assert run.dec(late).turns == []
    assert tick(run).finals == []
    run.now += run.policy.session_ttl_seconds + 1
    out = run.tick()
    assert [d["reason"] for d in out.dead_letters] == ["orphaned_decision"]


def test_the_final_record_carries_the_headers_of_the_turn_topic() -> None:
    run = Run(policy=Policy(org_id=ORG, late_decision_window_seconds=WINDOW))
    run.msg(message(text="q"))
    (revision,) = run.msg(assistant(message_id="a1")).turns
    run.now += WINDOW + 1
    (final,) = tick(run).finals
    turn_headers = dict(revision.headers)
    final_headers = dict(final.headers)
    assert final.key_bytes == revision.key_bytes
    for name in ("session_id", "revision", "final_after"):
        assert final_headers[name] == turn_headers[name]


def test_turns_closed_early_by_a_session_limit_go_final_at_once() -> None:
    run = Run(policy=Policy(org_id=ORG, max_open_turns=2))
    for n in range(4):
        run.msg(assistant(message_id=f"a{n}"))
    assert [(f.inference_call_id, f.reason) for f in finals(run)] == [
        ("a0", "evicted"),
        ("a1", "evicted"),
    ]
    assert_finals_are_latest_revisions(run)


def test_an_expiring_session_takes_its_turns_final_with_it() -> None:
    run = Run(policy=Policy(org_id=ORG, session_ttl_seconds=60.0))
    run.msg(assistant(message_id="a1"))
    run.msg(assistant(message_id="a2"))
    run.now += 61
    run.tick()
    assert [(f.inference_call_id, f.reason) for f in finals(run)] == [
        ("a1", "expired"),
        ("a2", "expired"),
    ]
    assert len(run.pipeline.store) == 0
    assert_finals_are_latest_revisions(run)


def test_a_decision_that_would_make_its_turn_too_large_leaves_the_turn_as_emitted() -> None:
    # A revision past max_turn_bytes is a turn_too_large dead letter: the decision leaves
    # the turn again, so that the turn's final record is its latest revision.
    policy = Policy(org_id=ORG, max_turn_bytes=2_000, late_decision_window_seconds=WINDOW)
    run = Run(policy=policy)
    run.msg(message(text="x" * 1_500))
    (first,) = run.msg(assistant(message_id="a1", tool_calls=[tool_call("t1")])).turns
    big = decision(call_id="t1", raw={"note": "y" * 600})
    out = run.dec(big)
    assert [d["reason"] for d in out.dead_letters] == ["turn_too_large"]
    assert out.outcome == "dead_lettered"
    (again,) = out.turns  # the turn as it was, under the number
    assert (again.revision, again.value) == (2, first.value)
    small = decision(call_id="t1", decision_id="d2", occurred_at="2026-01-01T10:05:00Z")
    (third,) = run.dec(small).turns
    assert third.revision == 3 and b"y" * 600 not in third.value
    run.now += WINDOW + 1
    (final,) = tick(run).finals
    assert (final.value, final.revision) == (third.value, 3)


def test_a_closed_turn_round_trips_through_the_state_json() -> None:
    state = SessionState("s1", 0.0)
    run = Run(policy=Policy(org_id=ORG, late_decision_window_seconds=WINDOW))
    run.pipeline.finals_now = False  # as the worker: closed turns wait in the store
    run.msg(assistant(message_id="a1", tool_calls=[tool_call("t1")]))
    run.dec(decision(call_id="t1"))
    run.now += WINDOW + 1
    tick(run)
    store = run.pipeline.store
    state = store.get("s1")  # type: ignore[assignment]
    closed = store.closed_of("s1")
    assert list(closed) == ["a1"] and not state.turns
    data = state.to_json(closed.values())
    again, again_closed = SessionState.from_json(data), closed_of_json(data)
    assert again.to_json(again_closed.values()) == data
    (turn,) = again_closed.values()
    assert finality.final_of("s1", turn) == finality.final_of("s1", closed["a1"])
    at = finality.next_at(state, closings(closed), run.policy)
    assert at == turn.closed[1]  # type: ignore[index]
    view = finality.view(state, closed.values(), run.policy)
    assert view == [
        {
            "inference_call_id": "a1",
            "revision": 2,
            "final": True,
            "final_after": turn.closed[1],  # type: ignore[index]
            "final_reason": "window",
            "written": False,
        }
    ]


def test_the_next_instant_is_the_oldest_turn_not_yet_final_else_the_expiry() -> None:
    policy = Policy(org_id=ORG, late_decision_window_seconds=WINDOW, max_open_turns=3)
    run = Run(policy=policy)
    run.pipeline.finals_now = False
    idle = SessionState("s1", 5.0)  # no turn: its expiry
    assert finality.next_at(idle, (), policy) == 5.0 + policy.session_ttl_seconds
    run.msg(assistant(message_id="a1"))
    store = run.pipeline.store
    state = store.get("s1")
    assert state is not None and finality.next_at(state, (), policy) == run.now + WINDOW
    first = run.now
    run.now += 10
    for n in range(2, 5):  # the fourth closes a1 early: due at once
        run.msg(assistant(message_id=f"a{n}"))
    assert list(store.closed_of("s1")) == ["a1"] and "a1" not in state.turns
    assert finality.next_at(state, closings(store.closed_of("s1")), policy) == 0.0
    assert store.sent("s1", "a1") is not None
    assert finality.next_at(state, closings(store.closed_of("s1")), policy) == first + 10 + WINDOW
    ttl = dataclasses.replace(policy, session_ttl_seconds=5.0)  # an idle time shorter
    assert finality.next_at(state, (), ttl) == state.last_seen + 5.0

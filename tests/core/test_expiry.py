"""SPEC §4 bounded state: idle sessions and closed turns leave; waiting decisions are orphaned."""

from __future__ import annotations

from stream_app.core.policy import Policy
from tests.factories import Run, assistant, decision, message, tool_call

POLICY = Policy(org_id="acme", session_ttl_seconds=600, late_decision_window_seconds=60)


def test_an_idle_session_is_dropped_and_its_waiting_decisions_are_orphaned() -> None:
    run = Run(policy=POLICY)
    run.dec(decision(call_id="never"))
    run.msg(message(text="pending", message_id="u1"))
    run.now += 601
    out = run.tick()
    (letter,) = out.dead_letters
    assert letter["reason"] == "orphaned_decision" and letter["offset"] == 0
    assert "never" in letter["error"]
    assert out.counts["pending_messages_expired"] == 1
    assert len(run.pipeline.store) == 0


def test_a_session_within_its_ttl_is_kept() -> None:
    run = Run(policy=POLICY)
    run.dec(decision(call_id="later"))
    run.now += 599
    assert run.tick().dead_letters == []
    run.msg(assistant(message_id="later"))
    assert len(run.final()["later"]["decisions"]) == 1


def test_an_expired_session_is_expired_when_its_next_record_arrives() -> None:
    run = Run(policy=POLICY)
    run.dec(decision(call_id="a1"))
    run.now += 601
    out = run.msg(assistant(message_id="a1"))
    assert [d["reason"] for d in out.dead_letters] == ["orphaned_decision"]
    assert run.final()["a1"]["decisions"] == []


def test_turns_past_the_late_decision_window_no_longer_take_decisions() -> None:
    run = Run(policy=POLICY)
    run.msg(assistant(message_id="a1", tool_calls=[tool_call("c1")]))
    run.now += 30
    run.dec(decision(call_id="c1", decision_id="in-window"))
    run.now += 31
    run.tick()
    run.dec(decision(call_id="c1", decision_id="too-late", accepted=False))
    assert [d["decision_id"] for d in run.final()["a1"]["decisions"]] == ["in-window"]
    state = run.pipeline.store.get("s1")
    assert state is not None and list(state.turns) == [] and len(state.waiting) == 1


def test_activity_keeps_a_session_alive() -> None:
    run = Run(policy=POLICY)
    run.dec(decision(call_id="c9"))
    for _ in range(3):
        run.now += 500
        run.msg(message(text="still here"))
    assert run.tick().dead_letters == []

"""SPEC §8 "Once": a key that went final never gets a second, different final record, within
the bound the final keys are remembered for (``state/final_keys.py``), in replay's pipeline."""

from __future__ import annotations

import orjson

from stream_app.core.counts import Count
from stream_app.core.policy import Policy
from stream_app.core.records import FinalTurn
from tests.core.test_finality import tick
from tests.factories import ORG, Run, assistant, decision, message, tool_call

WINDOW = 600.0
TTL = 3600.0


def finals(run: Run) -> list[FinalTurn]:
    return [f for out in run.outputs for f in out.finals]


def finals_by_key(run: Run) -> dict[bytes, list[bytes]]:
    by_key: dict[bytes, list[bytes]] = {}
    for final in finals(run):
        by_key.setdefault(final.key_bytes, []).append(final.value)
    return by_key


def test_a_redelivered_finish_after_its_identity_was_forgotten_is_a_duplicate() -> None:
    """Issue 49 item 2, first case: the identity limit forgot the finish's identity after its
    turn went final; the redelivery made a second final record holding only the answer."""
    policy = Policy(org_id=ORG, late_decision_window_seconds=WINDOW, max_remembered_identities=2)
    run = Run(policy=policy)
    first = assistant(message_id="a1", sequence=2)
    run.msg(message(text="the question", message_id="u1", sequence=1))
    run.msg(first)
    run.now += WINDOW + 1
    tick(run)
    for n in range(2, 5):  # later turns push a1's identity out of the remembered ones
        run.msg(message(text=f"q{n}", message_id=f"u{n}"))
        run.msg(assistant(message_id=f"a{n}"))
    assert run.counts[Count.IDENTITIES_FORGOTTEN] > 0
    emitted = len(run.revisions)

    out = run.msg(first)  # redelivered, under a new offset

    assert out.turns == [] and out.outcome == "duplicate"
    assert out.counts[Count.DUPLICATE_FINAL] == 1
    run.now += WINDOW + 1
    tick(run)
    assert len(run.revisions) == emitted
    (value,) = finals_by_key(run)[b'["s1","a1"]']
    assert [m["parts"][0]["content"] for m in orjson.loads(value)["new_messages"]] == [
        "the question",
        "done",
    ]


def test_a_transcript_published_again_after_its_session_expired_changes_no_final() -> None:
    """Issue 49 item 2, second case: the turn went final (expired) with an accepted decision;
    the transcript published again made a second final record without the decision."""
    policy = Policy(org_id=ORG, late_decision_window_seconds=2 * TTL, session_ttl_seconds=TTL)
    run = Run(policy=policy)
    question, answer = message(text="q"), assistant(message_id="a1", tool_calls=[tool_call("t1")])
    run.msg(question)
    run.msg(answer)
    run.dec(decision(call_id="t1"))
    run.now += TTL + 1
    run.tick()
    (final,) = finals(run)
    assert final.reason == "expired" and len(orjson.loads(final.value)["decisions"]) == 1

    run.msg(question)
    out = run.msg(answer)

    assert out.turns == [] and out.counts[Count.DUPLICATE_FINAL] == 1
    run.now += 3 * TTL
    run.tick()
    assert list(finals_by_key(run)) == [b'["s1","a1"]']
    assert len(finals_by_key(run)[b'["s1","a1"]']) == 1


def test_past_the_horizon_a_key_is_forgotten_and_its_finish_is_a_new_turn_again() -> None:
    """The documented bound: remembered for the session TTL plus the window, no longer."""
    policy = Policy(org_id=ORG, late_decision_window_seconds=WINDOW, session_ttl_seconds=TTL)
    run = Run(policy=policy)
    run.msg(assistant(message_id="a1"))
    run.now += WINDOW + 1
    tick(run)
    assert run.pipeline.store.final_keys.went_final("s1", "a1")
    run.now += TTL + WINDOW - 2  # the horizon counts from when the key went final
    tick(run)
    assert run.pipeline.store.final_keys.went_final("s1", "a1")
    run.now += 3
    tick(run)
    assert not run.pipeline.store.final_keys.went_final("s1", "a1")


def test_past_the_limit_the_oldest_keys_are_forgotten_and_counted() -> None:
    policy = Policy(org_id=ORG, late_decision_window_seconds=WINDOW, max_final_keys=3)
    run = Run(policy=policy)
    for n in range(5):
        run.msg(assistant(f"s{n}", message_id="a1"))
        run.now += 1
    run.now += WINDOW + 1
    out = tick(run)
    assert out.counts[Count.FINAL_KEYS_FORGOTTEN] == 2
    keys = run.pipeline.store.final_keys
    assert [keys.went_final(f"s{n}", "a1") for n in range(5)] == [False, False, True, True, True]
    assert keys.held() == 3


def test_a_decision_for_a_final_key_still_ends_as_a_dead_letter_not_a_revision() -> None:
    """What SPEC §8 keeps for late decisions holds with the keys remembered: nothing under a
    final key changes, and the decision is never dropped silently."""
    policy = Policy(org_id=ORG, late_decision_window_seconds=WINDOW, session_ttl_seconds=TTL)
    run = Run(policy=policy)
    run.msg(assistant(message_id="a1", tool_calls=[tool_call("t1")]))
    run.now += WINDOW + 1
    tick(run)
    assert run.dec(decision(call_id="t1")).turns == []
    run.now += TTL + 1
    run.tick()
    assert [d["reason"] for d in run.dead_letters] == ["orphaned_decision"]

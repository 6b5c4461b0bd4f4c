"""Every per-session structure has a limit (SPEC §6, issue 19): a record that would cross one
is a ``session_limit`` dead letter naming the limit and the session, and the session goes on.
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_app.core.policy import Policy
from stream_app.core.session import SessionState
from stream_app.state import entries
from tests.contracts import assert_valid_dead_letter
from tests.factories import ORG, Run, assistant, decision, message, tool_call


def only(run: Run, reason: str) -> dict[str, Any]:
    (letter,) = [d for d in run.dead_letters if d["reason"] == reason]
    assert_valid_dead_letter(letter)
    return letter


def state_of(run: Run, session: str = "s1") -> SessionState:
    state = run.pipeline.store.get(session)
    assert state is not None
    return state


def test_a_session_at_its_pending_count_dead_letters_the_next_message_and_goes_on() -> None:
    run = Run(policy=Policy(org_id=ORG, max_pending_messages=3))
    for i in range(3):
        run.msg(message(text=f"m{i}", message_id=f"u{i}"))
    out = run.msg(message(text="one too many", message_id="u3"))
    assert out.outcome == "dead_lettered" and out.counts["dead_letter:session_limit"] == 1
    letter = only(run, "session_limit")
    assert "max_pending_messages 3" in letter["error"] and "'s1'" in letter["error"]
    assert orjson.loads(letter["value"])["message"]["messageId"] == "u3"  # the record itself
    # A copy of a pending message replaces it: no new place is taken.
    assert run.msg(message(text="m1, final", message_id="u1")).outcome == "contributed"
    # The finish always enters: it empties the list, and the session goes on.
    (turn,) = run.msg(assistant(message_id="a1")).turns
    assert [m["parts"][0]["content"] for m in turn.turn["new_messages"]] == [
        "m0",
        "m1, final",
        "m2",
        "done",
    ]
    assert run.msg(message(text="after", message_id="u4")).outcome == "contributed"


def test_pending_bytes_are_measured_as_translated() -> None:
    run = Run(policy=Policy(org_id=ORG, max_pending_bytes=300))
    run.msg(message(text="x" * 150, message_id="u1"))
    out = run.msg(message(text="y" * 150, message_id="u2"))
    assert out.counts["dead_letter:session_limit"] == 1
    assert "max_pending_bytes 300" in only(run, "session_limit")["error"]
    assert state_of(run).pending_bytes < 300


def test_waiting_decisions_are_limited() -> None:
    run = Run(policy=Policy(org_id=ORG, max_waiting_decisions=2))
    for i in range(2):
        run.dec(decision(call_id=f"c{i}", decision_id=f"d{i}"))
    out = run.dec(decision(call_id="c9", decision_id="d9"))
    assert out.counts["dead_letter:session_limit"] == 1
    assert "max_waiting_decisions 2" in only(run, "session_limit")["error"]
    # A decision for a turn that is there does not wait: it is still taken.
    run.msg(assistant(message_id="a1", tool_calls=[tool_call("c0")]))
    assert run.dec(decision(call_id="a1", decision_id="d10")).outcome == "contributed"


def test_decisions_joined_to_one_turn_are_limited() -> None:
    run = Run(policy=Policy(org_id=ORG, max_turn_decisions=2))
    run.dec(decision(call_id="c1", decision_id="d0"))  # waits, joins at the turn
    run.msg(assistant(message_id="a1", tool_calls=[tool_call("c1")]))
    run.dec(decision(call_id="a1", decision_id="d1"))
    out = run.dec(decision(call_id="a1", decision_id="d2", accepted=False))
    assert out.counts["dead_letter:session_limit"] == 1 and out.turns == []
    assert "max_turn_decisions 2" in only(run, "session_limit")["error"]
    assert [d["decision_id"] for d in run.final()["a1"]["decisions"]] == ["d0", "d1"]


def test_waiting_decisions_past_a_turns_limit_are_dead_lettered_when_it_is_emitted() -> None:
    run = Run(policy=Policy(org_id=ORG, max_turn_decisions=1))
    run.dec(decision(call_id="c1", decision_id="d0"))
    run.dec(decision(call_id="c1", decision_id="d1", accepted=False))
    out = run.msg(assistant(message_id="a1", tool_calls=[tool_call("c1")]))
    assert [d["decision_id"] for d in out.turns[0].turn["decisions"]] == ["d0"]
    assert orjson.loads(only(run, "session_limit")["value"])["decision_id"] == "d1"


def test_past_the_open_turn_limit_the_oldest_turn_closes_early() -> None:
    run = Run(policy=Policy(org_id=ORG, max_open_turns=2))
    for i in range(3):
        run.msg(assistant(message_id=f"a{i}", tool_calls=[tool_call(f"c{i}")]))
    assert list(state_of(run).turns) == ["a1", "a2"]
    assert run.counts["turns_closed_early"] == 1
    # A late decision for the closed turn waits, and is orphaned rather than lost.
    assert run.dec(decision(call_id="c0", decision_id="late")).turns == []
    assert [d.decision["decision_id"] for d in state_of(run).waiting] == ["late"]


def test_open_turns_are_limited_by_their_bytes_too() -> None:
    run = Run(policy=Policy(org_id=ORG, max_open_turn_bytes=1500))
    for i in range(4):
        run.msg(assistant(text="z" * 400, message_id=f"a{i}"))
    state = state_of(run)
    assert state.open_turn_bytes <= 1500 and len(state.turns) < 4
    assert run.counts["turns_closed_early"] == 4 - len(state.turns)


def test_past_the_identity_limit_the_oldest_are_forgotten() -> None:
    run = Run(policy=Policy(org_id=ORG, max_remembered_identities=3))
    run.msg(message(text="first", message_id="u1"))
    run.msg(assistant(message_id="a1"))  # remembers u1, a1 and the call
    assert run.msg(message(text="first", message_id="u1")).outcome == "duplicate"
    run.msg(assistant(message_id="a2"))  # remembers a2 and its call: u1 is forgotten
    assert run.counts["identities_forgotten"] == 2
    assert len(state_of(run).seen_messages) == 3
    # A copy of a forgotten message is taken for a new one (docs/semantics.md).
    assert run.msg(message(text="first", message_id="u1")).outcome == "contributed"
    # A turn still open is never emitted twice, whatever was forgotten.
    assert run.msg(assistant(message_id="a2")).outcome == "duplicate"


def test_a_key_past_its_limit_is_a_dead_letter_carrying_it_truncated() -> None:
    run = Run()
    key = b"k" * (17 * 1024 * 1024)
    out = run.dec(decision(), key=key)
    assert out.outcome == "dead_lettered"
    letter = only(run, "session_limit")
    assert "key: is 17825792 bytes, over the 4096-byte limit" in letter["error"]
    assert letter["truncated"] is True and letter["original_key_length"] == len(key)
    assert len(orjson.dumps(letter)) <= 512 * 1024
    assert run.pipeline.store.get("s1") is None  # nothing of it is kept


def test_a_message_that_expands_past_the_record_limit_when_translated_is_too_large() -> None:
    # Tiny parts take over twice their bytes once translated ({"text":"a"} becomes
    # {"type":"text","content":"a"}), and tiny tool calls more than 1.5 times.
    parts = [{"text": "a"}] * 50_000
    calls = [{"id": "", "name": "", "arguments": ""}] * 5_000
    value = orjson.dumps(assistant(message_id="a1", content=parts, tool_calls=calls))
    assert len(value) < 1024 * 1024
    out = run_one(value)
    assert out["reason"] == "too_large" and "once translated" in out["error"]


def run_one(value: bytes) -> dict[str, Any]:
    run = Run()
    run.msg(value)
    (letter,) = run.dead_letters
    assert_valid_dead_letter(letter)
    return letter


# -- any sequence of valid records leaves every state within its limits -----------------

SMALL = Policy(
    org_id=ORG,
    max_pending_messages=3,
    max_pending_bytes=700,
    max_waiting_decisions=2,
    max_turn_decisions=2,
    max_open_turns=2,
    max_open_turn_bytes=3000,
    max_remembered_identities=4,
)

ids = st.sampled_from(["c1", "c2", "c3", "a1", "a2", "a3"])
records = st.lists(
    st.one_of(
        st.builds(
            lambda s, m, t: ("messages", message(s, text=t, message_id=m)),
            st.sampled_from(["s1", "s2"]),
            st.sampled_from(["u1", "u2", "u3", "u4", "u5", None]),
            st.text(alphabet="ab", max_size=150),
        ),
        st.builds(
            lambda s, m, calls: (
                "messages",
                assistant(s, message_id=m, tool_calls=[tool_call(c) for c in calls]),
            ),
            st.sampled_from(["s1", "s2"]),
            st.sampled_from(["a1", "a2", "a3"]),
            st.lists(st.sampled_from(["c1", "c2", "c3"]), max_size=2, unique=True),
        ),
        st.builds(
            lambda s, c, d: ("decisions", decision(s, c, decision_id=f"d{d}", accepted=d % 2)),
            st.sampled_from(["s1", "s2"]),
            ids,
            st.integers(0, 6),
        ),
    ),
    max_size=40,
)


def within_limits(state: SessionState, policy: Policy) -> None:
    assert len(state.pending_messages) <= policy.max_pending_messages
    assert state.pending_bytes == sum(p.size for p in state.pending)
    assert state.pending_bytes <= policy.max_pending_bytes
    assert len(state.waiting_decisions) <= policy.max_waiting_decisions
    assert len(state.turns) <= policy.max_open_turns
    assert state.open_turn_bytes == sum(t.size for t in state.turns.values())
    assert state.open_turn_bytes <= policy.max_open_turn_bytes
    assert all(len(t.decisions) <= policy.max_turn_decisions for t in state.turns.values())
    assert len(state.seen_messages) <= policy.max_remembered_identities


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records)
def test_any_sequence_of_valid_records_leaves_every_state_within_its_limits(
    stream: list[tuple[str, dict[str, Any]]],
) -> None:
    run = Run(policy=SMALL)
    for kind, value in stream:
        out = run.feed(kind, value)
        assert out.outcome is not None  # every record accounted
        for session in run.pipeline.store.session_ids():
            state = state_of(run, session)
            within_limits(state, SMALL)
            # And its entries hold exactly it: what a restarted worker reads back.
            head, items, bodies = entries.records(state)
            back, _, garbage, closed = entries.decode(
                head, items, {orjson.loads(k)[1]: orjson.loads(v) for k, v in bodies}.get
            )
            assert garbage == [] and back == state and closed == {}
    for letter in run.dead_letters:
        assert_valid_dead_letter(letter)

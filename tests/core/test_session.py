"""A session's state is a plain value: it survives a JSON round trip unchanged."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_app.core.session import (
    IDENTITY,
    IDENTITY_GROUP,
    RememberedIdentities,
    SessionState,
)
from stream_app.state import entries
from tests.factories import Run, assistant, decision, message, tool_call


def test_state_round_trips_through_json() -> None:
    run = Run()
    run.msg(message(text="u", message_id="u1", sequence=1))
    run.msg(assistant(message_id="a1", tool_calls=[tool_call("c1")]))
    run.dec(decision(call_id="c1"))
    run.dec(decision(call_id="c2", decision_id="d2", harness="codex"))
    run.msg(message(text="next", message_id="u2"))
    state = run.pipeline.store.get("s1")
    assert state is not None
    again = SessionState.from_json(state.to_json())
    assert again == state
    assert again.to_json() == state.to_json()


def test_session_inputs_round_trip_through_the_repartition_encoding() -> None:
    import orjson

    from stream_app.core.intake import decode
    from stream_app.core.policy import Policy
    from stream_app.core.records import SourceRecord, dump_input, load_input

    policy = Policy(org_id="acme")
    for kind, value in [
        ("messages", assistant(message_id="a", tool_calls=[tool_call("c")])),
        ("decisions", decision(call_id="c")),
    ]:
        record = SourceRecord(kind, "t", 3, 17, b"k", orjson.dumps(value))  # type: ignore[arg-type]
        item, _ = decode(record, policy, 0.0)
        assert item is not None
        assert load_input(dump_input(item)) == item


def test_a_turn_remembers_its_identities_in_one_entry() -> None:
    # An entry is a changelog record, and a record costs the same whatever it holds: a
    # turn of three messages makes one identity entry, not four (three messages, the call).
    run = Run()
    run.msg(message(text="u", message_id="u1"))
    run.msg(message(text="more", message_id="u2"))
    run.msg(assistant(message_id="a1"))
    state = run.pipeline.store.get("s1")
    assert state is not None
    _, items, _ = entries.records(state)
    remembered = [orjson.loads(v)[1:] for k, v in items if orjson.loads(k)[2] == IDENTITY]
    assert [ids for _, ids in remembered] == [["id:u1", "id:u2", "id:a1", "call:a1"]]
    assert list(state.seen_messages) == ["id:u1", "id:u2", "id:a1", "call:a1"]


@settings(max_examples=300, deadline=None)
@given(sizes=st.lists(st.integers(0, 40), max_size=12), limit=st.integers(1, 60))
def test_groups_forget_exactly_what_one_entry_per_identity_would(
    sizes: list[int], limit: int
) -> None:
    # The reference: each identity remembered alone, the oldest forgotten past the limit.
    # A turn's identities are new ones: a message or call already remembered is a duplicate.
    reference: dict[str, None] = {}
    state = SessionState("s", 0.0)
    for turn, size in enumerate(sizes):
        identities = [f"id:{turn}.{i}" for i in range(size)]
        forgot = 0
        for identity in identities:
            reference[identity] = None
            while len(reference) > limit:
                del reference[next(iter(reference))]
                forgot += 1
        assert state.remember(identities, limit) == forgot
        assert list(state.seen_messages) == list(reference)
        # What the entries hold is what is remembered, in order, and reads back as it.
        held = [i for group in state.remembered.values() for i in group.identities]
        assert held == list(reference)
        # A big turn is several entries: forgetting the oldest rewrites a bounded one.
        assert all(len(group.identities) <= IDENTITY_GROUP for group in state.remembered.values())
        assert SessionState.from_json(state.to_json()).seen_messages == state.seen_messages
        _, items, _ = entries.records(state)
        found = [(orjson.loads(k)[3], orjson.loads(v)[1:]) for k, v in items]
        assert entries.remembered(sorted(found)) == state.remembered


def test_an_identity_entry_of_the_layout_before_groups_reads_as_a_group_of_one() -> None:
    # [generation, identity] before groups; [generation, position, identities] since.
    groups = entries.remembered([(3, ["id:old"]), (7, [1, ["id:a", "call:a"]])])
    assert list(groups.values()) == [
        RememberedIdentities(["id:a", "call:a"], 7, 1),
        RememberedIdentities(["id:old"], 3, 3),
    ]

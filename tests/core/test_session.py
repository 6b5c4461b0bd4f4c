"""A session's state is a plain value: it survives a JSON round trip unchanged."""

from __future__ import annotations

from stream_app.core.session import SessionState
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

"""Issue 50 item 2: the core knows no storage; what a store wrote of a session is its own
record (``state/written.py``), the state's journal."""

from __future__ import annotations

import dataclasses

from stream_app.core.session import PendingMessage, SessionState
from stream_app.state.closed import ClosedTurns
from stream_app.state.written import Written
from tests.factories import Run, assistant


def message(identity: str) -> PendingMessage:
    return PendingMessage(identity, None, {"role": "user", "content": identity})  # type: ignore[typeddict-item,typeddict-unknown-key]


def test_a_session_state_holds_no_storage_bookkeeping() -> None:
    fields = {f.name for f in dataclasses.fields(SessionState)}
    assert not fields & {"generation", "written_next", "written_due", "made", "dropped"}
    # Nor the closed turns waiting for their final records: the store's (state/closed.py).
    assert "closed" not in fields
    assert not {"drop_closed", "empty_but_closed"} & set(dir(SessionState))


def test_a_closed_turn_leaves_the_state_and_the_store_keeps_it_until_sent() -> None:
    run = Run()
    run.pipeline.finals_now = False  # as the worker: the final record is written later
    run.policy = run.pipeline.policy = dataclasses.replace(run.policy, max_open_turns=1)
    run.msg(assistant(message_id="a1"))
    out = run.msg(assistant(message_id="a2"))  # closes a1 early, to make room
    assert out.closed == [] and out.finals == []  # kept by the store, not the outputs
    store = run.pipeline.store
    state = store.get("s1")
    assert state is not None and list(state.turns) == ["a2"]
    (turn,) = store.closed_of("s1").values()
    assert turn.call_id == "a1" and turn.closed is not None and turn.closed[0] == "evicted"
    assert store.sent("s1", "a1") is turn and not store.closed_of("s1")


def test_a_sent_turn_is_dropped_from_the_journal_with_its_decisions() -> None:
    run = Run()
    run.pipeline.finals_now = False
    run.policy = run.pipeline.policy = dataclasses.replace(run.policy, max_open_turns=1)
    run.msg(assistant(message_id="a1"))
    run.msg(assistant(message_id="a2"))
    (turn,) = run.pipeline.store.closed_of("s1").values()
    closed, written = ClosedTurns(), Written()
    closed.hold("s1", [turn])
    assert closed.take("s1", "a1", written) is turn and list(written.gone) == [turn.entry]
    assert closed.of("s1") == {}


def test_the_journal_is_told_what_a_record_changed_and_a_new_state_is_written_whole() -> None:
    state = SessionState("s", 0.0)
    state.add_pending(message("a"), 0.0)
    state.add_pending(message("b"), 0.0)
    written = Written.whole(state)  # never written: every entry it holds is new
    assert list(written.new) == [0, 1] and not written.gone
    written.take()
    state.journal = written
    state.add_pending(message("a"), 1.0)  # a copy with its identity replaces the first
    state.add_pending(message("c"), 1.0)
    state.add_pending(message("c"), 1.0)  # made and dropped in between: in neither
    made, dropped = written.take()
    assert list(made) == [2, 4] and list(dropped) == [0]

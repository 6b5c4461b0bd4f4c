"""Issue 50 item 2: the core knows no storage; what a store wrote of a session is its own
record (``state/written.py``), the state's journal."""

from __future__ import annotations

import dataclasses

from stream_app.core.session import PendingMessage, SessionState
from stream_app.state.written import Written


def message(identity: str) -> PendingMessage:
    return PendingMessage(identity, None, {"role": "user", "content": identity})  # type: ignore[typeddict-item,typeddict-unknown-key]


def test_a_session_state_holds_no_storage_bookkeeping() -> None:
    fields = {f.name for f in dataclasses.fields(SessionState)}
    assert not fields & {"generation", "written_next", "written_due", "made", "dropped"}


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

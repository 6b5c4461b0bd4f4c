"""The worker's changelog: a turn's body is logged once, and the log restores the state."""

from __future__ import annotations

from stream_app.pipeline import Pipeline
from stream_app.state.changelog import SEPARATOR, ChangelogStore
from tests.factories import Run, assistant, decision, message, tool_call


def logged(store: ChangelogStore) -> list[tuple[bytes, bytes | None]]:
    return [(key, value) for _, key, value in store.changes()]


def owning_all() -> ChangelogStore:
    store = ChangelogStore(partitions=4)
    store.own(range(4))
    return store


def run_on(store: ChangelogStore) -> Run:
    run = Run()
    run.pipeline = Pipeline(run.policy, store, clock=lambda: run.now)
    return run


def with_one_turn() -> ChangelogStore:
    """Session s1 after a user message and the assistant's answer (turn a1)."""
    store = owning_all()
    run = run_on(store)
    run.msg(message(text="u", message_id="u1"))
    run.msg(assistant(message_id="a1"))
    return store


def test_a_body_is_logged_once_before_its_session_and_restores_with_it() -> None:
    store = owning_all()
    run = run_on(store)
    run.msg(message(text="u", message_id="u1"))
    run.msg(assistant(message_id="a1", tool_calls=[tool_call("c1")]))
    first = logged(store)
    assert [key for key, _ in first] == [b"s1" + SEPARATOR + b"a1", b"s1"]

    run.dec(decision(call_id="c1"))  # changes the turn's decisions, not its body
    second = logged(store)
    assert [key for key, _ in second] == [b"s1"]

    restored = owning_all()
    restored.load(first + second)
    assert restored.get("s1") == store.get("s1")
    assert restored.get("s1").to_json() == store.get("s1").to_json()  # type: ignore[union-attr]
    restored.put(restored.get("s1"))  # type: ignore[arg-type]
    assert logged(restored) == [(b"s1", second[0][1])]  # the body is known as logged


def test_bodies_of_a_deleted_session_are_tombstoned_after_it() -> None:
    store = with_one_turn()
    written = logged(store)
    store.delete("s1")
    gone = logged(store)
    assert gone == [(b"s1", None), (b"s1" + SEPARATOR + b"a1", None)]
    restored = owning_all()
    restored.load(written + gone)
    assert restored.get("s1") is None and len(restored) == 0


def test_a_body_left_without_its_state_by_a_crash_is_tombstoned_at_the_next_checkpoint() -> None:
    store = with_one_turn()
    body_only = [r for r in logged(store) if r[0] != b"s1"]  # the state never written
    restored = owning_all()
    restored.load(body_only)
    assert restored.get("s1") is None
    assert logged(restored) == [(b"s1", None), (b"s1" + SEPARATOR + b"a1", None)]
    assert logged(restored) == []  # settled: nothing more to write


def test_a_capture_holds_each_session_as_it_was_when_taken_whatever_comes_after() -> None:
    store = owning_all()
    run = run_on(store)
    for sid in ("s1", "s2"):
        run.msg(message(sid, text="u", message_id=f"{sid}-u1"))
    then = {sid: store.get(sid).to_json(bodies=False) for sid in ("s1", "s2")}  # type: ignore[union-attr]
    capture = store.capture()
    run.msg(message("s2", text="later", message_id="s2-u2"))  # before it drained
    store.delete("s1")
    capture.drain()
    assert dict(((k, v) for _, k, v in capture.records)) == {b"s1": then["s1"], b"s2": then["s2"]}
    assert [k for _, k, v in store.changes()] == [b"s1", b"s2"]  # now, in order

"""Revision metadata of turn records (issue 12): the numbers and ``final_after`` the core
gives, that they survive the state's JSON, and how a consumer picks the latest revision."""

from __future__ import annotations

from collections import Counter

from stream_app.core.records import TurnRevision
from stream_app.core.revisions import Kept, RevisionHeaders, is_final, read_headers, replaces
from stream_app.core.session import SessionState
from stream_app.models.timestamps import format_utc
from stream_app.state import entries
from tests.factories import Run, assistant, decision, message, tool_call

WINDOW = 6 * 3600.0  # the Policy default, which Run uses


def revisions(run: Run) -> list[TurnRevision]:
    return [r for out in run.outputs for r in out.turns]


def test_a_turn_is_numbered_1_then_once_more_per_revision_with_its_final_instant() -> None:
    run = Run()
    emitted = run.now
    run.msg(assistant(message_id="a1", tool_calls=[tool_call("c1"), tool_call("c2")]))
    run.now += 10
    run.dec(decision(call_id="c1", decision_id="d1"))
    run.now += 10
    run.dec(decision(call_id="c2", decision_id="d2", occurred_at="2026-01-01T10:00:05Z"))
    run.msg(assistant(message_id="a2"))
    assert [(r.key, r.revision) for r in revisions(run)] == [
        ('["s1","a1"]', 1),
        ('["s1","a1"]', 2),
        ('["s1","a1"]', 3),
        ('["s1","a2"]', 1),
    ]
    # final_after is fixed at the first emission: a revision does not extend the window
    assert {r.final_after for r in revisions(run)[:3]} == {emitted + WINDOW}
    assert revisions(run)[3].final_after == emitted + 20 + WINDOW
    headers = dict(revisions(run)[2].headers)
    assert headers == {
        "session_id": b"s1",
        "revision": b"3",
        "final_after": format_utc(emitted + WINDOW).encode(),
    }


def test_a_decision_at_final_after_revises_the_turn_and_one_just_after_does_not() -> None:
    for late, revised in ((0.0, True), (0.001, False)):
        run = Run()
        (first,) = run.msg(assistant(message_id="a1", tool_calls=[tool_call("c1")])).turns
        run.now = first.final_after + late
        out = run.dec(decision(call_id="c1"))
        assert bool(out.turns) is revised, late
        if not revised:  # the turn has left the state: the decision waits, then is orphaned
            assert out.counts["turns_closed"] == 1


def test_the_revision_number_survives_the_state_json_as_a_restarted_worker_reads_it() -> None:
    run = Run()
    run.msg(assistant(message_id="a1", tool_calls=[tool_call("c1"), tool_call("c2")]))
    run.dec(decision(call_id="c1", decision_id="d1"))
    state = run.pipeline.store.get("s1")
    assert state is not None
    bodies = {key: turn.body for key, turn in state.turns.items()}
    head, written, _ = entries.records(state)
    from_entries, _, _, _ = entries.decode(head, written, bodies.get)
    for restored in (SessionState.from_json(state.to_json()), from_entries):
        after = Run(now=run.now, offset=run.offset)  # a new process: only the state is kept
        after.pipeline.store.put(restored)
        (revision,) = after.dec(decision(call_id="c2", decision_id="d2")).turns
        assert revision.revision == 3


def test_state_of_the_one_record_layout_is_read_as_absent_not_a_crash() -> None:
    # Before issue 19 a session was one record holding its turns (revisions and all); the
    # entries layout does not read it: such a head is logged and let go (state/sessions.py).
    from stream_app.state.sessions import TableSessions
    from tests.state.test_sessions import fresh_tables

    tables = fresh_tables()
    old = b'{"session_id":"s1","last_seen":0.0,"pending":[],"turns":[[{"x":1},[],0.0,[]]]}'
    tables[0].data[b"s1"] = old
    store = TableSessions(*tables, max_record_bytes=1 << 20)
    assert store.get("s1") is None


def test_a_clock_that_steps_back_never_lets_a_newer_turn_close_later_than_its_final_after() -> None:
    run = Run()
    (first,) = run.msg(assistant(message_id="a1", tool_calls=[tool_call("c1")])).turns
    run.now -= 3600  # the clock steps back an hour (or the session moved to such a worker)
    (second,) = run.msg(assistant(message_id="a2", tool_calls=[tool_call("c2")])).turns
    assert second.final_after == first.final_after
    run.now = second.final_after + 1
    out = run.dec(decision(call_id="c2"))  # after final_after: no revision
    assert out.turns == [] and out.counts["turns_closed"] == 2


def test_replay_numbers_the_example_as_its_emissions_per_key() -> None:
    run = Run()
    run.msg(message(text="u", message_id="u1"))
    run.dec(decision(call_id="c1", decision_id="early"))  # waits for its turn
    run.msg(assistant(message_id="a1", tool_calls=[tool_call("c1")]))
    run.dec(decision(call_id="a1", decision_id="late"))
    seen: Counter[str] = Counter()
    for r in revisions(run):
        seen[r.key] += 1
        assert r.revision == seen[r.key]
    assert seen == {'["s1","a1"]': 2}


def headers(revision: int, final_after: float, session: str = "s1") -> RevisionHeaders:
    return RevisionHeaders(session, revision, final_after)


def test_headers_read_back_as_written_and_malformed_ones_are_none() -> None:
    (revision,) = Run().msg(assistant("s\x00é", message_id="a1")).turns
    parsed = read_headers(revision.headers)
    assert parsed is not None
    assert parsed.session_id == "s\x00é" and parsed.revision == 1
    assert abs(parsed.final_after - revision.final_after) < 1e-6
    good = dict(revision.headers)
    assert read_headers(None) is None
    assert read_headers([("session_id", b"s")]) is None
    for name, bad in [("revision", b"two"), ("revision", b"0"), ("final_after", b"soon")]:
        assert read_headers(list({**good, name: bad}.items())) is None, (name, bad)


def test_a_later_offset_replaces_in_its_partition_and_a_higher_revision_across_them() -> None:
    assert replaces(Kept(1, 5, 1), Kept(1, 4, 2))  # one partition: the offset decides
    assert not replaces(Kept(1, 4, 2), Kept(1, 5, 1))
    assert replaces(Kept(3, 0, 2), Kept(0, 9, 2))  # two: the revision (a tie: read last)
    assert not replaces(Kept(3, 9, 1), Kept(0, 0, 2))
    assert replaces(Kept(3, 0, None), Kept(0, 9, 2))  # without headers: the one read last


def test_a_turn_is_final_only_past_final_after_and_never_without_headers() -> None:
    assert is_final(99.0, now=100.0)
    assert not is_final(100.0, now=100.0)
    assert not is_final(None, now=float("inf"))

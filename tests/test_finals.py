"""SPEC §8 through the worker's own path (``tests/finality_model.py``): the due index, and each
turn once on the final topic whatever the interleaving, the redeliveries and the crashes."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_app.cli.replay import FinalLines
from stream_app.core.policy import Policy
from stream_app.core.records import SourceRecord
from stream_app.state.due import OrderedKeys, bound, due_key
from stream_app.state.memory import MemorySessions
from tests.contracts import assert_valid_turn
from tests.factories import ORG, assistant, decision, message, tool_call
from tests.finality_model import DictTable, ModelWorker, Stopped, Tables, final_records

T0 = 1_767_261_600.0  # 2026-01-01T10:00:00Z
MESSAGES, DECISIONS = "llm.messages", "developer.decisions"


def record(topic: str, offset: int, value: dict[str, Any]) -> SourceRecord:
    kind = "messages" if topic == MESSAGES else "decisions"
    return SourceRecord(kind, topic, 0, offset, None, orjson.dumps(value))  # type: ignore[arg-type]


class Counting(ModelWorker):
    """A worker that counts the sessions a tick reads from the store."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.reads = 0
        get = self.store.get

        def counted(session_id: str) -> Any:
            self.reads += 1
            return get(session_id)

        self.store.get = counted  # type: ignore[method-assign]


def held_sessions(n: int, due: int, window: float) -> tuple[Counting, Tables, list[float]]:
    """``n`` sessions with a turn each, written; the first ``due`` of them emitted a window
    ago, the rest just now."""
    policy = Policy(org_id=ORG, late_decision_window_seconds=window)
    clock, tables = [T0], Tables()
    worker = Counting(tables, policy, clock)
    for s in range(n):
        clock[0] = T0 if s < due else T0 + window
        worker.apply(record(MESSAGES, s, assistant(f"s{s}", message_id=f"a{s}")))
    worker.checkpoint()
    return worker, tables, clock


def test_a_tick_costs_the_sessions_due_not_the_sessions_held() -> None:
    # The due index's cost, counted in operations: the sessions a tick reads from the store
    # and the index entries its range read looks at, with 50 and with 5,000 sessions held.
    window, costs = 600.0, []
    for n in (50, 5_000):
        worker, tables, clock = held_sessions(n, due=3, window=window)
        worker.reads = 0
        tables.due.order.steps = 0
        clock[0] = T0 + window + 1  # three are due; the others in a window's time
        worker.tick()
        costs.append((worker.reads, tables.due.order.steps))
        worker.checkpoint()
        assert len(tables.finals) == 3
        assert {f.inference_call_id for f in tables.finals} == {"a0", "a1", "a2"}
    assert costs[0] == costs[1]
    reads, steps = costs[1]
    assert reads == 3 and steps <= 2 * 3 + 2  # each due entry and its two children


def test_the_index_holds_one_key_a_session_and_moves_only_when_its_oldest_turn_does() -> None:
    policy = Policy(org_id=ORG, late_decision_window_seconds=600.0)
    clock, tables = [T0], Tables()
    worker = ModelWorker(tables, policy, clock)
    worker.apply(
        record(MESSAGES, 0, assistant("s1", message_id="a1", tool_calls=[tool_call("t1")]))
    )
    worker.checkpoint()
    assert list(tables.due.data) == [due_key(T0 + 600.0, "s1")]
    puts = tables.due.puts
    clock[0] += 10
    for n in range(1, 6):  # more turns and late decisions: the oldest stays, so does the key
        worker.apply(record(MESSAGES, n, assistant("s1", message_id=f"a{n + 1}")))
        worker.apply(
            record(
                DECISIONS,
                n - 1,
                decision("s1", "t1", decision_id=f"d{n}", occurred_at=f"2026-01-01T10:00:0{n}Z"),
            )
        )
        worker.checkpoint()
    assert tables.due.puts == puts and list(tables.due.data) == [due_key(T0 + 600.0, "s1")]
    clock[0] = T0 + 601
    worker.tick()
    worker.checkpoint()  # a1 written final and dropped
    worker.checkpoint()  # the drop written: the key moves to a2's instant
    assert [f.inference_call_id for f in tables.finals] == ["a1"]
    assert list(tables.due.data) == [due_key(T0 + 610.0, "s1")]


def test_a_stale_key_is_deleted_by_the_tick_that_reads_it() -> None:
    policy = Policy(org_id=ORG, late_decision_window_seconds=600.0)
    clock, tables = [T0], Tables()
    worker = ModelWorker(tables, policy, clock)
    worker.apply(record(MESSAGES, 0, assistant("s1", message_id="a1")))
    worker.checkpoint()
    # What a checkpoint stopped between the new key and the old key's deletion leaves; and
    # the key of a session no longer held.
    stale = [due_key(T0 - 5, "s1"), due_key(T0 - 5, "gone")]
    for key in stale:
        tables.due.data[key] = b""
        tables.due.order.add(key)
    worker.tick()
    worker.checkpoint()
    assert sorted(tables.due.data) == [due_key(T0 + 600.0, "s1")]
    assert tables.finals == []
    assert bound(T0) > due_key(T0, "s1") > due_key(T0 - 0.001, "s1")


def test_a_final_written_before_a_crash_is_written_again_identical_and_only_then_dropped() -> None:
    policy = Policy(org_id=ORG, late_decision_window_seconds=600.0)
    repeats = set()
    for stop_at in range(0, 16):
        clock, tables = [T0], Tables()
        worker = ModelWorker(tables, policy, clock)
        for n in range(3):
            worker.apply(record(MESSAGES, n, assistant(f"s{n}", message_id=f"a{n}")))
        worker.checkpoint()
        clock[0] = T0 + 601
        worker.tick()
        tables.budget.left = stop_at
        try:
            worker.checkpoint()  # the closings, then the finals, then the drops' next write
            worker.checkpoint()
        except Stopped:
            pass
        tables.budget.left = None
        worker = ModelWorker(tables, policy, clock)  # reads the tables again
        for _ in range(3):
            worker.tick()
            worker.checkpoint()
        records = final_records(tables)
        assert len(records) == 3, stop_at
        assert all(len(versions) == 1 for versions in records.values()), stop_at
        assert finals_left(tables) == 0, stop_at
        # What is left of the index is each session's expiry: no instant of a turn.
        expiry = [due_key(T0 + policy.session_ttl_seconds, f"s{n}") for n in range(3)]
        assert sorted(tables.due.data) == expiry, stop_at
        repeats.add(len(tables.finals) - 3)
    assert repeats >= {0, 1, 2, 3}  # some stops fell between a final's write and its drop


def finals_left(tables: Tables) -> int:
    """Closed turns still in the tables (each would be written final again): the sessions
    as a worker reads them back."""
    store = ModelWorker(tables, Policy(org_id=ORG), [T0]).store
    return sum(len(store.read(sid)[3]) for sid in store.session_ids())


def race(policy: Policy, before: list[str], again: list[str], stop_at: int) -> Tables:
    """A session at its limit of two open turns, a decision for its oldest and the message
    of a third turn, applied in the order ``before`` after a checkpoint, with a tick and the
    clock past the oldest's window; a checkpoint stopped after ``stop_at`` writes; then the
    two read again in the order ``again``, and everything written."""
    records = {
        "m": record(MESSAGES, 2, assistant("s1", message_id="a3")),
        "d": record(DECISIONS, 0, decision("s1", "t1")),
        "tick": None,
    }
    clock, tables = [T0], Tables()
    worker = ModelWorker(tables, policy, clock)
    worker.apply(
        record(MESSAGES, 0, assistant("s1", message_id="a1", tool_calls=[tool_call("t1")]))
    )
    worker.apply(record(MESSAGES, 1, assistant("s1", message_id="a2")))
    worker.checkpoint()
    for step in before:
        if step == "advance":
            clock[0] += policy.late_decision_window_seconds + 1
        elif (r := records[step]) is None:
            worker.tick()
        else:
            worker.apply(r)
    tables.budget.left = stop_at
    try:
        worker.checkpoint()
        worker.checkpoint()
    except Stopped:
        tables.budget.left = None
        clock[0] += 5
        worker = ModelWorker(tables, policy, clock)
        for step in again:
            if (r := records.get(step)) is not None:
                if worker.applied.get(r.topic, 0) == r.offset:
                    worker.apply(r)
            elif step == "tick":
                worker.tick()
    tables.budget.left = None
    clock[0] += policy.late_decision_window_seconds + policy.session_ttl_seconds + 1
    for _ in range(3):
        worker.tick()
        worker.checkpoint()
    return tables


def test_a_decision_racing_the_limit_that_closes_its_turn_goes_final_once_across_a_crash() -> None:
    # The decision joins the oldest turn before the third turn closes it, or comes after and
    # waits: either is right, but a crash may make the records read again come in the other
    # order. A final record written before the closing it follows was on the changelog
    # would then be followed by another, different one.
    policy = Policy(org_id=ORG, max_open_turns=2, late_decision_window_seconds=1_000.0)
    for before in (["d", "m"], ["m", "d"]):
        for again in (["d", "m"], ["m", "d"]):
            for stop_at in range(40):
                assert_once(race(policy, before, again, stop_at))


def test_a_decision_racing_the_window_of_its_turn_goes_final_once_across_a_crash() -> None:
    # The decision comes within the window, a tick closes the turn once it has passed; read
    # again after a crash, the clock is past the window before the decision is applied.
    policy = Policy(org_id=ORG, late_decision_window_seconds=30.0)
    for before in (["d", "advance", "tick"], ["advance", "tick", "d"], ["advance", "d", "tick"]):
        for again in (["d", "tick"], ["tick", "d"]):
            for stop_at in range(40):
                assert_once(race(policy, before, again, stop_at))


# -- properties ----------------------------------------------------------------------


@st.composite
def workloads(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Messages and decisions of a few sessions, in publication order, with redeliveries."""
    by_session: list[list[dict[str, Any]]] = []
    decisions: list[dict[str, Any]] = []
    for s in range(draw(st.integers(1, 3))):
        sid = f"s{s}"
        reachable = []
        messages: list[dict[str, Any]] = []
        by_session.append(messages)
        for t in range(draw(st.integers(1, 5))):
            if draw(st.booleans()):
                messages.append(message(sid, text=f"q{t}", message_id=f"{sid}-u{t}"))
            tools = [f"{sid}-t{t}-{i}" for i in range(draw(st.integers(0, 2)))]
            messages.append(
                assistant(
                    sid,
                    f"done {t}",
                    message_id=f"{sid}-a{t}",
                    tool_calls=[tool_call(x, arguments={"x": x}) for x in tools],
                )
            )
            reachable += [f"{sid}-a{t}", *tools]
        for d in range(draw(st.integers(0, 6))):
            decisions.append(
                decision(
                    sid,
                    # Most for the session's first turns: those a limit closes early.
                    draw(st.sampled_from([*reachable[:3], *reachable[:3], *reachable, "nowhere"])),
                    decision_id=f"{sid}-d{d}",
                    occurred_at=f"2026-01-01T10:00:{d:02d}Z",
                    accepted=draw(st.booleans()),
                )
            )
    rng = random.Random(draw(st.integers(0, 2**16)))
    messages = []  # the sessions interleaved, each in its own order
    while any(by_session):
        messages.append(rng.choice([m for m in by_session if m]).pop(0))
    rng.shuffle(decisions)
    for stream in (messages, decisions):
        for value in list(stream):
            if rng.random() < 0.2:  # a redelivery: the same record again, later
                stream.insert(rng.randrange(stream.index(value) + 1, len(stream) + 1), value)
    return messages, decisions


Step = tuple[str, int]
steps = st.lists(
    st.tuples(
        st.sampled_from(
            [
                *["messages", "decisions"] * 3,
                *["tick", "advance", "checkpoint"] * 2,
                "crash",
                "kill",
            ]
        ),
        st.integers(0, 30),
    ),
    max_size=150,
)


def run_schedule(
    policy: Policy,
    streams: tuple[list[dict[str, Any]], list[dict[str, Any]]],
    schedule: list[Step],
    seconds: float,
) -> Tables:
    """Applies the streams in the interleaving ``schedule`` draws, with ticks, the clock
    moving on, checkpoints and crashes (a worker stopped after a number of a checkpoint's
    writes, the next reading again from the committed offsets) between; then lets every
    window and session pass and writes the rest."""
    clock, tables = [T0], Tables()
    worker = ModelWorker(tables, policy, clock)
    topics = {MESSAGES: streams[0], DECISIONS: streams[1]}
    choices = iter(schedule)
    while any(worker.applied.get(t, 0) < len(s) for t, s in topics.items()):
        what, arg = next(choices, ("messages", 0))
        if what == "tick":
            worker.tick()
        elif what == "advance":
            clock[0] += arg % 4 * seconds
        elif what == "checkpoint":
            worker.checkpoint()
        elif what in ("crash", "kill"):  # stopped in a checkpoint's writes, or between two
            tables.budget.left = arg if what == "crash" else 0
            with contextlib.suppress(Stopped):
                worker.checkpoint()
            tables.budget.left = None
            worker = ModelWorker(tables, policy, clock)
        else:
            topic = MESSAGES if what == "messages" else DECISIONS
            if worker.applied.get(topic, 0) >= len(topics[topic]):
                topic = DECISIONS if topic == MESSAGES else MESSAGES
            offset = worker.applied.get(topic, 0)
            worker.apply(record(topic, offset, topics[topic][offset]))
    clock[0] += policy.late_decision_window_seconds + policy.session_ttl_seconds + 1
    for _ in range(3):  # close, write the finals, write the drops
        worker.tick()
        worker.checkpoint()
    return tables


def replayed_latest(policy: Policy, streams: tuple[list[Any], list[Any]]) -> dict[bytes, bytes]:
    """An uninterrupted replay's latest revision of each turn (file order: messages first)."""
    from stream_app.worker.pipeline import Pipeline

    pipeline = Pipeline(policy, MemorySessions(), clock=lambda: T0)
    latest: dict[bytes, bytes] = {}
    lines = FinalLines()
    for topic, stream in ((MESSAGES, streams[0]), (DECISIONS, streams[1])):
        for offset, value in enumerate(stream):
            out = pipeline.process(record(topic, offset, value))
            lines.add(out)
            latest.update({r.key_bytes: r.value for r in out.turns})
    lines.add(pipeline.finish())
    finals = {k: v for _, line in lines.final for k, v in [line_pair(line)]}
    assert finals == latest  # replay's FINAL lines are its latest revisions
    return latest


def line_pair(line: bytes) -> tuple[bytes, bytes]:
    doc = orjson.loads(line)
    value = line[line.index(b',"value":') + len(b',"value":') : -2]
    return doc["key"].encode(), value


def assert_once(tables: Tables, forgets_after: float | None = None) -> dict[bytes, bytes]:
    """Every turn on the final topic, each once or repeated identical, and each final one
    of its key's revisions on the turn topic, with that revision's number.

    With ``forgets_after`` (the final keys' horizon, TTL plus window), a key may go final
    again once that long has passed since it last did: its finishing message read again
    after the key was forgotten makes a new turn (semantics.md states the bound)."""
    records = final_records(tables)
    emitted: dict[bytes, set[tuple[int, bytes]]] = {}
    for key, revision, value in tables.turns:
        emitted.setdefault(key, set()).add((revision, value))
    assert set(records) == set(emitted), "every turn reaches the final topic"
    finals = {}
    for key, versions in records.items():
        if len(versions) > 1 and forgets_after is not None:
            instants = sorted({f.final_after for f in tables.finals if f.key_bytes == key})
            apart = all(b - a > forgets_after for a, b in itertools.pairwise(instants))
            assert apart and len(instants) == len(versions), f"{key!r} went final twice"
        else:
            assert len(versions) == 1, f"{key!r} went final with differing records"
        for revision, value, headers in versions:
            assert (revision, value) in emitted[key]
            named = dict(headers)
            assert named["revision"] == str(revision).encode()
            assert named["final_reason"] in (b"window", b"evicted", b"expired")
            assert_valid_turn(orjson.loads(value))
            finals[key] = value
    return finals


PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(workloads(), steps)
def test_any_interleaving_redelivery_and_crash_writes_the_replays_latest_revisions_once(
    streams: tuple[list[dict[str, Any]], list[dict[str, Any]]], schedule: list[Step]
) -> None:
    # Windows far longer than the run: which decisions join a turn depends on nothing the
    # schedule decides, so the final records are an uninterrupted replay's latest revisions.
    policy = Policy(org_id=ORG, late_decision_window_seconds=100_000.0)
    tables = run_schedule(policy, streams, schedule, seconds=5.0)
    assert assert_once(tables) == replayed_latest(policy, streams)


# Short windows, two open turns a session: turns go final between the records of their
# session, decisions arrive after theirs went final, and a crash may fall anywhere, a final
# record written and its drop not. One identity remembered, sessions expiring between the
# records of a stream (issue 49 item 2): a redelivered finish comes after its identity was
# forgotten, or after its session expired, and its key is final already: a duplicate.
CLOSING = {
    "windows-and-limits": (
        Policy(
            org_id=ORG,
            late_decision_window_seconds=20.0,
            session_ttl_seconds=60.0,
            max_open_turns=2,
        ),
        9.0,
    ),
    "forgotten-and-expired": (
        Policy(
            org_id=ORG,
            late_decision_window_seconds=20.0,
            session_ttl_seconds=30.0,
            max_remembered_identities=1,
        ),
        15.0,
    ),
}


@pytest.mark.parametrize("closing", list(CLOSING))
@PROPERTY
@given(workloads(), steps)
def test_turns_closing_mid_stream_still_go_final_once_each(
    closing: str,
    streams: tuple[list[dict[str, Any]], list[dict[str, Any]]],
    schedule: list[Step],
) -> None:
    policy, seconds = CLOSING[closing]
    tables = run_schedule(policy, streams, schedule, seconds=seconds)
    assert_once(tables, policy.session_ttl_seconds + policy.late_decision_window_seconds)
    assert finals_left(tables) == 0 and tables.heads.data == {}


def test_a_tick_reads_its_limit_of_the_sessions_due_oldest_first_and_says_what_it_left() -> None:
    policy = Policy(org_id=ORG, late_decision_window_seconds=600.0)
    clock, tables = [T0], Tables()
    worker = ModelWorker(tables, policy, clock)
    for s in range(5):  # due one second apart, s0 first
        clock[0] = T0 + s
        worker.apply(record(MESSAGES, s, assistant(f"s{s}", message_id=f"a{s}")))
    worker.checkpoint()
    clock[0] = T0 + 700
    pipeline, closed = worker.pipeline, []
    while True:
        out = pipeline.tick(0, limit=2)
        closed.append(out.counts["turns_closed"])
        if not pipeline.more_reached:
            break
        assert pipeline.waiting == 2 + worker.store.reached_left
        worker.checkpoint()  # the finals written; the next checkpoint moves the keys on
        worker.checkpoint()
    worker.checkpoint()
    assert closed == [2, 2, 1]
    written = [f.inference_call_id for f in tables.finals]  # sessions in any order at once
    assert [set(written[:2]), set(written[2:4]), written[4:]] == [
        {"a0", "a1"},
        {"a2", "a3"},
        ["a4"],
    ]


class CountedReads:
    """Counts the records a table hands out: each value got, each item and key listed."""

    def __init__(self, tables: Tables) -> None:
        self.reads = 0
        for table in (tables.heads, tables.entries, tables.bodies, tables.due, tables.final_keys):
            self._count(table)

    def _count(self, table: DictTable) -> None:
        get, items_from, keys_between = table.get, table.items_from, table.keys_between

        def counted_get(key: bytes) -> bytes | None:
            value = get(key)
            self.reads += value is not None
            return value

        def counted_items(partition: int, prefix: bytes) -> list[tuple[bytes, bytes]]:
            items = items_from(partition, prefix)
            self.reads += len(items)
            return items

        def counted_keys(
            partition: int, low: bytes, high: bytes, limit: int | None = None
        ) -> list[bytes]:
            keys = keys_between(partition, low, high, limit)
            self.reads += len(keys)
            return keys

        table.get = counted_get  # type: ignore[method-assign]
        table.items_from = counted_items  # type: ignore[method-assign]
        table.keys_between = counted_keys  # type: ignore[method-assign]


def idle_sessions(n: int, policy: Policy) -> Tables:
    """``n`` sessions written, each a user message waiting and no turn, s<i> last seen at
    T0 + i: one written by a worker, the rest its copies under other ids."""
    clock, tables = [T0], Tables()
    worker = ModelWorker(tables, policy, clock)
    worker.apply(record(MESSAGES, 0, message("s0", message_id="u0")))
    worker.checkpoint()
    head = orjson.loads(tables.heads.data.pop(b"s0"))
    ((entry_key, entry),) = tables.entries.data.items()
    tables.entries.data.clear()
    tables.due.data.clear()
    tables.due.order = OrderedKeys()
    for i in range(n):
        sid = f"s{i}"
        last_seen = T0 + i
        at = last_seen + policy.session_ttl_seconds
        doc = {**head, "session_id": sid, "last_seen": last_seen, "due": at}
        tables.heads.data[sid.encode()] = orjson.dumps(doc)
        tables.entries.data[entry_key.replace(b'"s0"', orjson.dumps(sid))] = entry
        tables.due.data[due_key(at, sid)] = b""
    tables.due.order = OrderedKeys(tables.due.data)
    return tables


def test_a_tick_reads_the_sessions_reached_not_the_100000_idle_sessions_held() -> None:
    """Issue 50 item 1: a timer pass used to include a sweep that read every head of a
    partition (100,000 reads for 100,000 idle sessions, each minute); the tick, the one
    timer now, reads the index up to now and the sessions it names: here the 5 sessions
    whose idle time has passed, each its index key, head and entry (15 reads)."""
    policy = Policy(org_id=ORG, session_ttl_seconds=600.0)
    tables = idle_sessions(100_000, policy)
    clock = [T0 + policy.session_ttl_seconds + 4.5]  # s0 to s4 idle past their time
    worker = ModelWorker(tables, policy, clock)
    counted = CountedReads(tables)
    worker.tick()
    print(f"store reads in a tick of 100,000 idle sessions: {counted.reads}")
    assert counted.reads == 5 * 3
    worker.checkpoint()
    assert len(tables.heads.data) == 100_000 - 5
    assert worker.tables.turns == [] and tables.due.data.keys() >= {
        due_key(T0 + 5 + policy.session_ttl_seconds, "s5")
    }
    counted.reads = 0
    worker.tick()  # nothing reached since
    assert counted.reads == 0


def test_a_head_that_does_not_read_is_filed_for_the_tick_which_lets_it_go() -> None:
    """What the sweep did for a garbage head (read it as absent and delete it, never stop)
    the tick does: the assignment's pass files it at once."""
    policy = Policy(org_id=ORG)
    tables = idle_sessions(2, policy)
    tables.heads.data[b"s1"] = b"\x00 not json"
    worker = ModelWorker(tables, policy, [T0])
    asyncio.run(worker.store.index_held([0], T0))
    worker.tick()
    worker.checkpoint()
    assert set(tables.heads.data) == {b"s0"}

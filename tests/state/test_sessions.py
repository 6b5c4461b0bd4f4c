"""Session states and the turn bodies they name, in their two tables (``state/sessions.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from stream_app.core.records import turn_key
from stream_app.state.sessions import Snapshot, TableSessions
from tests.factories import Run, assistant, message, tool_call


class Changelogged:
    """A table as TableSessions uses it, noting each send and each wait for the acks."""

    def __init__(self, name: str, journal: list[str]) -> None:
        self.name, self.journal = name, journal
        self.data: dict[bytes, bytes] = {}

    def get(self, key: bytes) -> bytes | None:
        return self.data.get(key)

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.data)

    async def put(self, key: bytes, value: bytes | None) -> None:
        self.journal.append(f"send {self.name}")
        if value is None:
            self.data.pop(key, None)
        else:
            self.data[key] = value

    async def written(self) -> None:
        self.journal.append(f"acked {self.name}")

    def partition_for_key(self, key: bytes) -> int:
        return 0

    def keys_from(self, partition: int, prefix: bytes) -> list[bytes]:
        return [k for k in self.data if k.startswith(prefix)]

    def items_from(self, partition: int, prefix: bytes) -> list[tuple[bytes, bytes]]:
        return [(k, v) for k, v in self.data.items() if k.startswith(prefix)]


@pytest.fixture
def journal() -> list[str]:
    return []


@pytest.fixture
def tables(journal: list[str]) -> tuple[Changelogged, Changelogged, Changelogged]:
    return (
        Changelogged("sessions", journal),
        Changelogged("decisions", journal),
        Changelogged("turn_bodies", journal),
    )


def finished_turn() -> Any:
    run = Run()
    run.msg(message(text="fix it", message_id="u1", sequence=1))
    run.msg(assistant(message_id="a1", tool_calls=[tool_call("c1")]))
    state = run.pipeline.store.get("s1")
    assert state is not None and state.turns
    return state


def test_a_state_is_sent_only_after_the_bodies_it_names_are_acknowledged(
    tables: tuple[Changelogged, Changelogged, Changelogged], journal: list[str]
) -> None:
    # Two topics, no transaction: a worker stopped between the two sends would leave a
    # state naming a body that a recovering worker cannot find (it stopped, LookupError,
    # on every restart).
    sessions, decisions, bodies = tables
    store = TableSessions(sessions, decisions, bodies)
    store.put(finished_turn())
    snapshot: Snapshot = store.seal()
    asyncio.run(store.write(snapshot))
    assert journal.index("acked turn_bodies") < journal.index("send sessions")
    assert journal.index("send turn_bodies") < journal.index("acked turn_bodies")


def test_a_state_is_sent_only_after_the_collapse_entries_it_relies_on_are_acknowledged(
    tables: tuple[Changelogged, Changelogged, Changelogged], journal: list[str]
) -> None:
    # A state on the changelog whose decision's entry is not: a later copy of that decision
    # would be applied again. (An entry without its state is harmless: see core/collapse.)
    sessions, decisions, bodies = tables
    store = TableSessions(sessions, decisions, bodies)
    state = finished_turn()
    store.put(state)
    store.collapse.remember("s1", "nk", '["d1","decisions",0,7]')
    asyncio.run(store.write(store.seal()))
    assert journal.index("send decisions") < journal.index("acked decisions")
    assert journal.index("acked decisions") < journal.index("send sessions")
    # An expired session's entries go after its state does.
    journal.clear()
    store.delete("s1")
    store.collapse.forget("s1")
    asyncio.run(store.write(store.seal()))
    assert journal.index("send sessions") < journal.index("send decisions")
    assert decisions.data == {}


def test_a_state_naming_a_missing_body_is_read_without_that_turn(
    tables: tuple[Changelogged, Changelogged, Changelogged],
) -> None:
    sessions, decisions, bodies = tables
    state = finished_turn()
    sessions.data[b"s1"] = state.to_json(bodies=False)  # and no body in turn_bodies
    read = TableSessions(sessions, decisions, bodies).read("s1")
    assert read is not None
    assert read.turns == {}
    assert read.applied == state.applied  # everything else as written
    assert orjson.loads(read.to_json())["seen_messages"] == sorted(state.seen_messages)


def test_a_sweep_decodes_only_the_sessions_it_expires(
    tables: tuple[Changelogged, Changelogged, Changelogged],
) -> None:
    # A sweep asks every held session whether it is due; decoding each (and reading its
    # turn bodies) made a worker's memory grow with the sessions it held.
    from stream_app.core.policy import Policy
    from stream_app.pipeline import Pipeline

    sessions, decisions, bodies = tables
    state = finished_turn()
    for i, last_seen in enumerate([100.0, 100.0, 5_000.0]):
        state.session_id, state.last_seen = f"s{i}", last_seen
        sessions.data[f"s{i}".encode()] = state.to_json(bodies=False)
        for call_id, turn in state.turns.items():
            bodies.data[turn_key(f"s{i}", call_id)] = orjson.dumps(turn.body)
    store = TableSessions(sessions, decisions, bodies)
    policy = Policy(org_id="acme", session_ttl_seconds=1_000.0)
    due = store.due_in(0, policy, now=5_500.0)
    assert sorted(due) == ["s0", "s1"]
    assert store._live == {}  # nothing decoded to find them
    out = Pipeline(policy, store, clock=lambda: 5_500.0).sweep(due)
    assert out.counts["sessions_expired"] == 2
    assert set(store._live) == {"s0", "s1"}  # read to be deleted; s2 was never decoded
    assert store._live["s0"] is None and store._live["s1"] is None


def test_sessions_held_are_counted_as_they_change_not_by_reading_the_table(
    tables: tuple[Changelogged, Changelogged, Changelogged],
) -> None:
    sessions, decisions, bodies = tables
    state = finished_turn()
    sessions.data[b"s1"] = state.to_json(bodies=False)
    store = TableSessions(sessions, decisions, bodies)
    assert store.recount() == 1 and len(store) == 1
    store.get("s1")
    store.put(state)  # changed, not new
    store.get("s2")
    state.session_id = "s2"
    store.put(state)  # new
    assert len(store) == 2
    store.delete("s1")
    assert len(store) == 1
    sessions.data.clear()  # /metrics reads the count, not the table
    assert len(store) == 1


def test_an_idle_store_lets_go_of_its_decoded_states(
    tables: tuple[Changelogged, Changelogged, Changelogged],
) -> None:
    # Kept after a burst, the decoded states pinned memory the allocator could not give back
    # (python -m bench --soak). Written ones go once a whole interval passed without work;
    # one not yet written stays, whatever happens.
    sessions, decisions, bodies = tables
    store = TableSessions(sessions, decisions, bodies)
    state = finished_turn()
    store.put(state)
    asyncio.run(store.write(snapshot := store.seal()))
    store.settled(snapshot)
    state.session_id = "s2"
    store.put(state)  # changed, not yet written
    assert store.forget_if_idle() is False  # there was work since the last ask
    assert set(store._live) == {"s1", "s2"}
    assert store.forget_if_idle() is True
    assert set(store._live) == {"s2"}
    assert store.get("s1") is not None  # read back from the tables
    assert store.forget_if_idle() is False

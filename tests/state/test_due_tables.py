"""The due index's table (``state/due.py``): a partition's keys read in order up to a bound,
from RocksDB and from ``memory://`` alike, and what the memory store's heap costs a read."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import cast

import faust
import pytest

from stream_app.app import App
from stream_app.models.topics import partition_for
from stream_app.state.due import OrderedKeys, OrderedMemoryStore, bound, due_key, session_of_due
from stream_app.state.tables import KeyPartitionedTable

PARTITIONS = 4
T0 = 1_767_261_600.0


def due_table(datadir: Path, store: str) -> KeyPartitionedTable:
    """The due table of an app that never starts: its store is used alone."""
    app: faust.App = App(
        "test-due",
        broker="kafka://127.0.0.1:9",
        store=store,
        datadir=str(datadir),
        topic_partitions=PARTITIONS,
        Table=KeyPartitionedTable,
    )
    table = app.Table(
        "due", partitions=PARTITIONS, session_of=session_of_due, memory_store=OrderedMemoryStore
    )
    return cast(KeyPartitionedTable, table)


@pytest.fixture(params=["rocksdb://", "memory://"])
def table(request: pytest.FixtureRequest, tmp_path: Path) -> KeyPartitionedTable:
    return due_table(tmp_path, request.param)


def test_a_partitions_keys_come_in_the_order_of_their_instants_up_to_the_bound(
    table: KeyPartitionedTable,
) -> None:
    sessions = [f"s{n}" for n in range(40)]
    for n, session in enumerate(sessions):
        key = due_key(T0 + 40 - n, session)  # later sessions due earlier
        table.data.write(table.partition_for_key(key), key, b"")  # type: ignore[attr-defined]
    for partition in range(PARTITIONS):
        mine = [s for s in sessions if partition_for(s.encode(), PARTITIONS) == partition]
        due = [s for s in mine if T0 + 40 - int(s[1:]) <= T0 + 20]
        keys = table.keys_between(partition, b"", bound(T0 + 20))
        assert [session_of_due(k).decode() for k in keys] == sorted(due, key=lambda s: -int(s[1:]))
        assert table.keys_between(partition, b"", bound(T0)) == []
    # A key deleted is gone from the reads; one written again is read once.
    key = due_key(T0 + 1, "s39")
    partition = table.partition_for_key(key)
    table.data.write(partition, key, None)  # type: ignore[attr-defined]
    assert key not in table.keys_between(partition, b"", bound(T0 + 40))
    table.data.write(partition, key, b"")  # type: ignore[attr-defined]
    table.data.write(partition, key, b"")  # type: ignore[attr-defined]
    assert table.keys_between(partition, b"", bound(T0 + 1)) == [key]


def test_the_memory_store_rebuilds_its_order_after_a_recovery(tmp_path: Path) -> None:
    table = due_table(tmp_path, "memory://")
    store = cast(OrderedMemoryStore, table.data)
    keys = [due_key(T0 + n, f"s{n}") for n in range(10)]
    events = [
        SimpleNamespace(key=k, value=b"", message=SimpleNamespace(value=b"", partition=0))
        for k in keys
    ]
    store.apply_changelog_batch(events, lambda k: k, lambda v: v)  # type: ignore[arg-type]
    everything = [k for p in range(PARTITIONS) for k in table.keys_between(p, b"", bound(T0 + 99))]
    assert sorted(everything) == sorted(keys)


def test_a_read_of_the_heap_looks_at_the_keys_due_and_their_children_only() -> None:
    # Operations, not time: the entries a read looks at with 100 and 100,000 keys held, 5
    # due, and the deleted keys it drops once they are the smallest.
    steps = []
    for held in (100, 100_000):
        keys = OrderedKeys(due_key(T0 + 1_000 + n, f"s{n}") for n in range(held))
        live = {*keys.heap}
        for n in range(5):
            key = due_key(T0 + n, f"due{n}")
            keys.add(key)
            live.add(key)
        keys.steps = 0
        found = keys.below(bound(T0 + 10), live.__contains__)
        assert len(found) == 5
        steps.append(keys.steps)
        for key in found:
            live.discard(key)  # written final: their sessions' keys move on
        keys.steps = 0
        assert keys.below(bound(T0 + 10), live.__contains__) == []
        assert keys.steps <= 5 + 3  # the five dropped, then the root and its two children
    assert steps[0] == steps[1] and steps[1] <= 2 * 5 + 1


def test_a_limited_read_of_the_heap_gives_the_smallest_keys_first() -> None:
    keys = OrderedKeys(due_key(T0 + n, f"s{n}") for n in (5, 3, 9, 1, 7, 2, 8))
    live = set(keys.heap)
    assert keys.below(bound(T0 + 8), live.__contains__, limit=3) == [
        due_key(T0 + n, f"s{n}") for n in (1, 2, 3)
    ]
    assert keys.below(bound(T0 + 8), live.__contains__) == [
        due_key(T0 + n, f"s{n}") for n in (1, 2, 3, 5, 7, 8)
    ]

"""Table keys live in their session's partition, whatever event is current (``state/``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import cast

import faust
import orjson
import pytest
from faust.types import TP
from faust.types.tuples import ConsumerMessage
from hypothesis import given
from hypothesis import strategies as st

from stream_app.app import App
from stream_app.models.topics import partition_for
from stream_app.state import entries
from stream_app.state.sessions import Snapshot, TableCollapse, collapse_key, session_of
from stream_app.state.tables import KeyPartitionedTable, RocksDBStore

PARTITIONS = 4
# Session ids whose JSON encodings start like one another's, and one with a NUL.
SESSIONS = ["ab", 'ab",', "ab\x00x", "a", "b\u00e9"]


def table_of(
    datadir: Path,
    name: str,
    store: str = "rocksdb://",
    partitions: int = PARTITIONS,
    session_of: Callable[[bytes], bytes] = bytes,
) -> KeyPartitionedTable:
    """A table of an app that never starts (no broker is asked): its store is used alone."""
    app: faust.App = App(
        f"test-{name}",
        broker="kafka://127.0.0.1:9",
        store=store,
        datadir=str(datadir),
        topic_partitions=partitions,
        Table=KeyPartitionedTable,
    )
    return cast(KeyPartitionedTable, app.Table(name, partitions=partitions, session_of=session_of))


@pytest.fixture(params=["rocksdb://", "memory://"])
def decisions(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KeyPartitionedTable]:
    yield table_of(tmp_path, "decisions", request.param, session_of=session_of)


def test_a_key_is_filed_in_its_sessions_partition_outside_any_event(
    decisions: KeyPartitionedTable,
) -> None:
    # Faust's RocksDB store files a key under the current event's partition, and has
    # none to go by when a batch is written after its events.
    for session in SESSIONS:
        key = collapse_key(session, "nk")
        decisions.data[key] = b"d1"
        partition = partition_for(session.encode(), PARTITIONS)
        assert decisions.partition_for_key(key) == partition
        assert decisions.keys_from(partition, key) == [key]
        assert decisions.data[key] == b"d1"


class Stand:
    """The writes TableCollapse makes, applied to the table's store (no producer here)."""

    def __init__(self, table: KeyPartitionedTable) -> None:
        self.table = table

    def get(self, key: bytes) -> bytes | None:
        return self.table.data.get(key)

    async def put(self, key: bytes, value: bytes | None) -> None:
        if value is None:
            self.table.data.pop(key, None)
        else:
            self.table.data[key] = value

    def partition_for_key(self, key: bytes) -> int:
        return self.table.partition_for_key(key)

    def keys_from(self, partition: int, prefix: bytes) -> list[bytes]:
        return self.table.keys_from(partition, prefix)

    async def written(self) -> None:
        pass


async def written(collapse: TableCollapse, snapshot: Snapshot) -> None:
    """The collapse's part of a checkpoint (the states are written in between)."""
    await collapse.write_remembered(snapshot)
    await collapse.write_forgotten(snapshot)


def write(collapse: TableCollapse, number: int) -> Snapshot:
    """Seals the open batch and writes it, as a checkpoint does."""
    snapshot = Snapshot(number)
    collapse.seal(snapshot)
    asyncio.run(written(collapse, snapshot))
    collapse.settled(snapshot)
    return snapshot


def test_forgetting_a_session_drops_its_entries_and_no_one_elses(
    decisions: KeyPartitionedTable,
) -> None:
    collapse = TableCollapse(Stand(decisions))
    for session in SESSIONS:
        collapse.remember(session, "nk1", f"{session}-d1")
        collapse.remember(session, "nk2", f"{session}-d2")
    write(collapse, 0)
    collapse.forget("ab")
    assert collapse.first("ab", "nk1") is None  # at once, before the batch is written
    collapse.remember("ab", "nk1", "ab-new")  # the session starts again in the same batch
    write(collapse, 1)
    assert collapse.first("ab", "nk1") == "ab-new"
    assert collapse.first("ab", "nk2") is None
    for session in SESSIONS[1:]:
        assert collapse.first(session, "nk1") == f"{session}-d1"
        assert collapse.first(session, "nk2") == f"{session}-d2"


def test_a_value_set_again_is_read_and_written_as_last_set(decisions: KeyPartitionedTable) -> None:
    # The core sets a key again (a Codex resend's sibling key, taken by the copy with the
    # path; a decision_id, marked conflicted): the last value rules, in the batch that set
    # it, in a later one, and once written, whatever was written before it.
    collapse = TableCollapse(Stand(decisions))
    collapse.remember("ab", "k", "v1")
    collapse.remember("ab", "k", "v2")
    assert collapse.first("ab", "k") == "v2"
    first = Snapshot(0)
    collapse.seal(first)
    collapse.remember("ab", "k", "v3")  # before the first snapshot is written
    assert first.remembered == {collapse_key("ab", "k"): "v2"}
    asyncio.run(written(collapse, first))
    collapse.settled(first)
    assert collapse.first("ab", "k") == "v3"
    write(collapse, 1)
    assert collapse.first("ab", "k") == "v3"
    assert decisions.data[collapse_key("ab", "k")] == b"v3"


def test_snapshots_written_in_order_keep_their_order(decisions: KeyPartitionedTable) -> None:
    collapse = TableCollapse(Stand(decisions))
    collapse.remember("ab", "nk1", "d1")
    first = Snapshot(0)
    collapse.seal(first)
    collapse.forget("ab")  # the next checkpoint expires the session ...
    second = Snapshot(1)
    collapse.seal(second)
    for snapshot in (first, second):  # ... and both are written, in order, before settling
        asyncio.run(written(collapse, snapshot))
    for snapshot in (first, second):
        collapse.settled(snapshot)
    assert collapse.first("ab", "nk1") is None


def test_a_partitions_items_are_the_tables_own_and_no_one_elses(
    decisions: KeyPartitionedTable,
) -> None:
    # Faust keeps the changelog offset it has applied in each RocksDB database, under a key
    # of its own; a sweep that read it as a session's state stopped the worker.
    for session in SESSIONS:
        decisions.data[collapse_key(session, "nk")] = b"d1"
    partition = partition_for(SESSIONS[0].encode(), PARTITIONS)
    if hasattr(decisions.data, "set_persisted_offset"):
        decisions.data.set_persisted_offset(
            TP(decisions.changelog_topic.get_topic_name(), partition), 41
        )
    items = decisions.items_from(partition, b"")
    assert items
    assert all(session_of(key) in {s.encode() for s in SESSIONS} for key, _ in items)
    assert {partition_for(session_of(key), PARTITIONS) for key, _ in items} == {partition}


def test_a_standbys_records_are_written_to_the_store_and_its_offset_noted_once(
    decisions: KeyPartitionedTable,
) -> None:
    key = collapse_key("ab", "nk")
    gone = collapse_key("ab", "ok")
    decisions.data[gone] = b"d0"
    partition = decisions.partition_for_key(key)  # the changelog's: the session's
    changelog = TP(decisions.changelog_topic.get_topic_name(), partition)
    records = [
        ConsumerMessage(
            changelog.topic, partition, offset, 0.0, 0, [], k, v, None, 1, 1, tp=changelog
        )
        # A keyless record (no writer of this app makes one) is skipped, not a crash.
        for offset, k, v in [(4, key, b"d1"), (5, gone, None), (6, None, b"x"), (7, key, b"d2")]
    ]
    decisions.apply_standby(records)
    assert decisions.get(key) == b"d2"
    assert decisions.get(gone) is None
    if isinstance(decisions.data, RocksDBStore):  # Faust's memory store keeps no offset
        assert decisions.data.persisted_offset(changelog) == 7


def test_a_rocksdb_partition_writes_without_its_write_ahead_log(tmp_path: Path) -> None:
    # The changelog rebuilds a table; the database's own log only slowed every put.
    table = table_of(tmp_path, "sessions")
    store = table.data
    for i in range(1000):
        store[f"s{i}".encode()] = b"x" * 400
    # RocksDB's write-ahead log files are named by number: NNNNNN.log.
    written = sum(p.stat().st_size for p in tmp_path.rglob("*.log") if p.name[0].isdigit())
    assert store._dbs, "no partition database was opened"
    assert written == 0, f"{written} bytes of write-ahead log"


@given(st.text(), st.integers(0, 3), st.sampled_from("mdti"), st.integers(0, 10**6))
def test_a_keys_session_is_read_as_the_key_spells_it(
    session: str, epoch: int, kind: str, n: int
) -> None:
    # session_of reads an id off the key's text when it holds no escape: the same bytes as
    # parsing the key, for any id (quotes, backslashes, control characters, any Unicode).
    for key in (entries.entry_key(session, epoch, kind, n), collapse_key(session, "nk")):
        assert session_of(key) == str(orjson.loads(key)[0]).encode() == session.encode()

"""The final keys' table (``state/final_keys.py``): both records of a key filed in its
session's partition, and a partition's keys read oldest first, from RocksDB and memory."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import faust
import pytest

from stream_app.app import App
from stream_app.models.topics import partition_for
from stream_app.state.due import OrderedMemoryStore
from stream_app.state.final_keys import (
    ORDER,
    lookup_key,
    order_key,
    session_of_final_key,
)
from stream_app.state.tables import KeyPartitionedTable

PARTITIONS = 4
T0 = 1_767_261_600.0


@pytest.fixture(params=["rocksdb://", "memory://"])
def table(request: pytest.FixtureRequest, tmp_path: Path) -> KeyPartitionedTable:
    app: faust.App = App(
        "test-final-keys",
        broker="kafka://127.0.0.1:9",
        store=request.param,
        datadir=str(tmp_path),
        topic_partitions=PARTITIONS,
        Table=KeyPartitionedTable,
    )
    made = app.Table(
        "final_keys",
        partitions=PARTITIONS,
        session_of=session_of_final_key,
        memory_store=OrderedMemoryStore,
    )
    return cast(KeyPartitionedTable, made)


@pytest.mark.parametrize("session", ["s1", 'quo"te', "ünï", "back\\slash"])
def test_both_records_of_a_key_are_filed_in_its_sessions_partition(session: str) -> None:
    lookup = lookup_key(session, "a1")
    assert session_of_final_key(lookup) == session.encode()
    assert session_of_final_key(order_key(T0, lookup)) == session.encode()


def test_a_partitions_order_records_come_oldest_first(table: KeyPartitionedTable) -> None:
    sessions = [f"s{n}" for n in range(30)]
    for n, session in enumerate(sessions):
        lookup = lookup_key(session, "a1")
        partition = table.partition_for_key(lookup)
        assert partition == partition_for(session.encode(), PARTITIONS)
        assert table.partition_for_key(order_key(T0 - n, lookup)) == partition
        table.data.write(partition, lookup, b"x")  # type: ignore[attr-defined]
        table.data.write(partition, order_key(T0 - n, lookup), b"")  # type: ignore[attr-defined]
    for partition in range(PARTITIONS):
        mine = [s for s in sessions if partition_for(s.encode(), PARTITIONS) == partition]
        keys = table.keys_between(partition, ORDER, order_key(T0 - 10, b""))
        older = sorted((s for s in mine if int(s[1:]) > 10), key=lambda s: -int(s[1:]))
        assert [session_of_final_key(k).decode() for k in keys] == older

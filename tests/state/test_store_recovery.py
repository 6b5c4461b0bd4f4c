"""Issue 20 item 2: a table partition's RocksDB that does not open because its files are
damaged is moved aside and opened empty, so Faust rebuilds the partition from its changelog
(it replays a changelog partition from the offset stored in the database, from the start
when there is none). A database that is merely locked is left alone."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import rocksdict
from faust.types import TP

from stream_app.models.topics import partition_for
from stream_app.observability import logs
from stream_app.state.tables import KeyPartitionedTable, RocksDBStore
from tests.state.test_tables import table_of
from tests.test_app import PARTITIONS as PIPELINE_PARTITIONS
from tests.test_app import Pipeline, example_lines
from tests.test_worker_exit import _events as _events_of
from tests.test_worker_exit import _named

PARTITIONS = 2


@pytest.fixture
def table(tmp_path: Path) -> Iterator[KeyPartitionedTable]:
    yield table_of(tmp_path, "sessions", partitions=PARTITIONS)


@pytest.fixture
def events() -> Iterator[io.StringIO]:
    out = io.StringIO()
    logs.configure(out)
    yield out
    logs.configure()


def _events(out: io.StringIO, name: str) -> list[dict[str, Any]]:
    found = [orjson.loads(line) for line in out.getvalue().splitlines()]
    return [e for e in found if e["event"] == name]


def _written_and_closed(table: KeyPartitionedTable) -> tuple[RocksDBStore, TP, Path]:
    """A partition that holds a key and the changelog offset it was applied up to, closed
    as a stopped worker leaves it."""
    store = table.data
    assert isinstance(store, RocksDBStore)
    tp = TP(table.changelog_topic.get_topic_name(), 0)
    key = next(k for k in (b"s%d" % i for i in range(100)) if table.partition_for_key(k) == 0)
    store[key] = b"state"
    store.set_persisted_offset(tp, 41)
    assert store.persisted_offset(tp) == 41
    store._dbs.pop(0).close()
    return store, tp, store.partition_path(0)


def test_a_database_with_a_corrupt_current_file_is_moved_aside_and_opened_empty(
    table: KeyPartitionedTable, events: io.StringIO
) -> None:
    store, tp, path = _written_and_closed(table)
    (path / "CURRENT").write_bytes(b"garbage\n")
    with pytest.raises(Exception, match="Corruption"):  # what Faust met, at every restart
        rocksdict.Rdict(str(path)).close()

    # Faust asks a partition's offset first when it recovers a table: none, so it replays
    # the whole changelog partition into the empty database.
    assert store.persisted_offset(tp) is None
    assert list(store.keys()) == []
    (moved,) = [p for p in path.parent.iterdir() if p.name.startswith(f"{path.name}.damaged-")]
    assert (moved / "CURRENT").read_bytes() == b"garbage\n"  # kept as it was found
    (event,) = _events(events, "store_moved_aside")
    assert event["path"] == str(path) and event["moved_to"] == str(moved)
    assert "Corruption" in event["error"] and event["level"] == "warning"

    # The new database is a working one, and stays: reopened, nothing is moved again.
    store[b"s-new"] = b"rebuilt"
    store.set_persisted_offset(tp, 7)
    store._dbs.pop(0).close()
    assert store.persisted_offset(tp) == 7
    assert len(_events(events, "store_moved_aside")) == 1


def test_a_database_whose_current_file_names_a_missing_manifest_is_moved_aside(
    table: KeyPartitionedTable, events: io.StringIO
) -> None:
    store, tp, path = _written_and_closed(table)
    (path / "CURRENT").write_bytes(b"MANIFEST-999999\n")
    assert store.persisted_offset(tp) is None
    assert len(_events(events, "store_moved_aside")) == 1


def test_a_database_locked_by_another_opener_is_not_moved_aside(
    table: KeyPartitionedTable, events: io.StringIO
) -> None:
    store, tp, path = _written_and_closed(table)
    holder = rocksdict.Rdict(str(path), options=rocksdict.Options(raw_mode=True))
    try:
        with pytest.raises(Exception, match="lock"):
            store.persisted_offset(tp)
    finally:
        holder.close()
    assert not _events(events, "store_moved_aside")
    assert not [p for p in path.parent.iterdir() if ".damaged-" in p.name]
    assert store.persisted_offset(tp) == 41  # once free, the same database, state intact


@pytest.mark.broker
def test_a_worker_whose_session_partition_will_not_open_rebuilds_it_from_the_changelog(
    topics: dict[str, str], pipeline: Pipeline
) -> None:
    p = pipeline
    worker, expected, expected_letters = p.the_examples_turns_on_a_worker()

    # Every table's database of the session's partition: its state lives in all six (the
    # due index's too, its turns being open).
    partition = partition_for(b"sess-7f3a", PIPELINE_PARTITIONS)
    data = Path(worker.env["STREAM_APP_DATA_DIR"])
    damaged = sorted(data.glob(f"**/*-{partition}.db"))
    assert len(damaged) == 6, damaged  # a database a table (app.py)
    for db in damaged:
        (db / "CURRENT").write_bytes(b"garbage\n")

    worker.start().wait_ready()
    moved = _named(_events_of(worker.log), "store_moved_aside")
    assert sorted(e["path"] for e in moved) == [str(db) for db in damaged]
    assert all("Corruption" in e["error"] for e in moved)
    recovered = _named(_events_of(worker.log), "recovery_done")
    assert recovered[-1]["sessions"] == 2  # the session and its retry came back
    # The decisions revise turns that only the rebuilt state knows.
    p.publish([line for line in example_lines() if line["topic"] == "decisions"])
    p.wait_for(expected, expected_letters, timeout=60)

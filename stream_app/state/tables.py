"""Faust tables whose every key lives in the partition of the session it belongs to.

The agent writes a batch's sessions after the batch, when the current event is one of
another partition. Faust sends a changelog record to the current event's partition, or to
its key's hash with ``use_partitioner=True``, and its stores file the key under the current
event's partition either way: RocksDB would keep a session in another partition's database,
given up with that partition while its state lives on. Here a table names the session of a
key (``session_of``); its changelog record and its store entry go to that session's
partition (murmur2, as ``partition_for``), whatever event is current.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import rocksdict
from faust.stores import memory, rocksdb
from faust.tables.table import Table
from faust.types import TP, Message, StoreT
from yarl import URL

from stream_app.broker.record_batches import RecordBatches, aiokafka_producer
from stream_app.models.topics import partition_for
from stream_app.state.damaged import damaged, move_aside

# Faust opens each table partition's RocksDB with 64 MiB write buffers (three of them) and a
# 2 GiB block cache: a worker's 12 databases (3 tables x 4 partitions) could hold gigabytes.
# The state is small records read back by key, mostly from the worker's own memory of the
# sessions it works on: a few MiB a database is plenty, and memory does not grow with the
# sessions held (``python -m bench --soak``).
ROCKSDB_OPTIONS = {
    "write_buffer_size": 4 * 1024 * 1024,
    "max_write_buffer_number": 2,
    "block_cache_size": 4 * 1024 * 1024,
    "block_cache_compressed_size": 0,
}


class _KeyPartitioned:
    table: Any  # a KeyPartitionedTable

    def _partition(self, key: bytes) -> int:
        return int(self.table.partition_for_key(key))


def _without_wal(db: Any) -> Any:
    """Writes skip RocksDB's write-ahead log: the changelog is what a table is rebuilt from,
    and the offset of the changelog a database holds (Faust's ``set_persisted_offset``) is
    written to the same database after the records it covers, so a crash loses a suffix of
    both together and recovery reads the changelog on from where the database stands, as
    Kafka Streams' stores do. The log would be a second copy of the changelog, written at
    every put."""
    if isinstance(db, rocksdict.Rdict):
        options = rocksdict.WriteOptions()
        # A property at run time; rocksdict's stubs call it a method.
        options.disable_wal = True  # type: ignore[method-assign,assignment]
        db.set_write_options(options)
    return db


class RocksDBStore(_KeyPartitioned, rocksdb.Store):
    def _open_for_partition(self, partition: int) -> Any:
        """A database whose files are damaged is moved aside and the partition opened
        empty, which Faust then rebuilds from its changelog (``state/damaged.py``); any
        other failure to open is raised, as Faust does."""
        try:
            return _without_wal(super()._open_for_partition(partition))
        except Exception as exc:
            path = self.partition_path(partition)
            if not damaged(path, exc):
                raise
            move_aside(path, exc)
        return _without_wal(super()._open_for_partition(partition))

    def _set(self, key: bytes, value: bytes | None) -> None:
        self.write(self._partition(key), key, value)

    def write(self, partition: int, key: bytes, value: bytes | None) -> None:
        """A key's value in its partition's database (None: deleted). Faust's key index is
        never kept: it serves only the look-ups this store does by partition instead."""
        db = self._db_for_partition(partition)
        if value is None:
            db.delete(key)
        else:
            db.put(key, value)

    def _get(self, key: bytes) -> bytes | None:
        return self.read(self._partition(key), key)

    def read(self, partition: int, key: bytes) -> bytes | None:
        value: bytes | None = self._db_for_partition(partition).get(key)
        return value

    def _contains(self, key: bytes) -> bool:
        return self._get(key) is not None

    def _del(self, key: bytes) -> None:
        self.write(self._partition(key), key, None)

    def keys_from(self, partition: int, prefix: bytes) -> list[bytes]:
        """The keys of a partition that start with ``prefix``, in key order."""
        return [key for key, _ in self.items_from(partition, prefix)]

    def keys_between(
        self, partition: int, low: bytes, high: bytes, limit: int | None = None
    ) -> list[bytes]:
        """The keys of a partition from ``low`` up to ``high`` (not included), in key
        order, the first ``limit``: one seek, then one step a key (``state/due.py``)."""
        it = self._db_for_partition(partition).iter()
        it.seek(low)
        keys: list[bytes] = []
        while it.valid() and (key := it.key()) < high and (limit is None or len(keys) < limit):
            if key != self.offset_key:
                keys.append(key)
            it.next()
        return keys

    def items_from(self, partition: int, prefix: bytes) -> list[tuple[bytes, bytes]]:
        """The keys and values of a partition whose keys start with ``prefix``, in one
        pass over its database."""
        it = self._db_for_partition(partition).iter()
        it.seek(prefix)
        items = []
        while it.valid() and (key := it.key()).startswith(prefix):
            if key != self.offset_key:  # Faust's own: the changelog offset it has applied
                items.append((key, it.value()))
            it.next()
        return items


class MemoryStore(_KeyPartitioned, memory.Store):  # type: ignore[type-arg]
    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        self._key_partition[key] = self._partition(key)

    def read(self, partition: int, key: bytes) -> bytes | None:
        value: bytes | None = self.data.get(key)
        return value

    def write(self, partition: int, key: bytes, value: bytes | None) -> None:
        if value is None:
            self.data.pop(key, None)
            self._key_partition.pop(key, None)
        else:
            self.data[key] = value
            self._key_partition[key] = partition

    def __delitem__(self, key: Any) -> None:
        super().__delitem__(key)
        self._key_partition.pop(key, None)

    def keys_from(self, partition: int, prefix: bytes) -> list[bytes]:
        return [key for key, _ in self.items_from(partition, prefix)]

    def items_from(self, partition: int, prefix: bytes) -> list[tuple[bytes, bytes]]:
        keys = (k for k in self.data if k.startswith(prefix))
        return sorted((k, self.data[k]) for k in keys if self._partition(k) == partition)


class KeyPartitionedTable(Table[bytes, bytes]):
    """``app.Table`` of this app (the ``Table`` setting): bytes keyed, filed by key."""

    def __init__(
        self,
        *args: Any,
        session_of: Callable[[bytes], bytes] = bytes,
        memory_store: type[MemoryStore] | None = None,
        **kwargs: Any,
    ) -> None:
        self.session_of = session_of
        # ``memory://``'s store: one that keeps its keys in order for ``keys_between``
        # (``state/due.py``), or the plain one.
        self.memory_store = memory_store or MemoryStore
        kwargs.setdefault("use_partitioner", True)
        kwargs.setdefault("key_type", bytes)
        kwargs.setdefault("value_type", bytes)
        kwargs["options"] = {**ROCKSDB_OPTIONS, **(kwargs.get("options") or {})}
        super().__init__(*args, **kwargs)
        #: Changelog records on their way to the producer, a record batch a partition.
        self._changelog = RecordBatches(lambda: aiokafka_producer(self.app.producer))
        self._changelog_tps: dict[int, TP] = {}

    def get(self, key: bytes, default: bytes | None = None) -> bytes | None:  # type: ignore[override]
        """A key's value from its partition's store, in one look-up: Faust's ``get`` looks
        a key up twice (``in``, then the value) through its serializers and sensors."""
        value = cast(RocksDBStore | MemoryStore, self.data).read(self.partition_for_key(key), key)
        return default if value is None else value

    async def put(self, key: bytes, value: bytes | None) -> None:
        """Writes (``None``: deletes) a key, its changelog record appended to its
        partition's record batch (``broker/record_batches.py``), handed over at
        ``written``. The store is written by partition, past Faust's serializers (raw:
        bytes stay bytes) and key index (``RocksDBStore.write``).

        ``table[key] = value`` would queue the record in Faust's producer buffer, which a
        batch of writes fills: Faust's conductor then stops delivering records until the
        buffer drains, one record at a time; and Faust's producer flush, which it also
        runs before a commit, returns after 0.1 s with records still buffered. Faust's
        ``Topic.send`` resolves a callback per record (``_on_changelog_sent``, which writes
        the partition's offset to RocksDB each time); a batch is acknowledged once.
        """
        partition = self.partition_for_key(key)
        cast(RocksDBStore | MemoryStore, self.data).write(partition, key, value)
        tp = self._changelog_tps.get(partition)
        if tp is None:
            tp = self._changelog_tps[partition] = TP(
                self.changelog_topic.get_topic_name(), partition
            )
        await self._changelog.append(tp, key, value)

    async def written(self) -> None:
        """Waits until the broker has every changelog record put so far, raising if it
        refused one; then notes each partition's last offset once, as Faust notes every
        record's (recovery reads the changelog on from there)."""
        last: dict[TP, int] = {}
        for delivery in await self._changelog.hand_over_all():
            last[delivery.tp] = max(last.get(delivery.tp, -1), await delivery.last_offset())
        for tp, offset in last.items():
            self.data.set_persisted_offset(tp, offset)

    def apply_standby(self, records: Sequence[Message]) -> None:
        """A standby's changelog records of one partition, in offset order, written to its
        store and its offset noted once (the consumer's rule R13). Faust takes each through
        its conductor, a queue and recovery's loop (an event, two tasks and a ``wait_for`` a
        record), which cost a worker keeping standbys twice the CPU of one without."""
        store = cast(RocksDBStore | MemoryStore, self.data)
        for record in records:
            if record.key is not None:  # no entry of a table: not this app's, and skipped
                store.write(record.partition, record.key, record.value)
        last = records[-1]
        store.set_persisted_offset(last.tp, last.offset)

    def partition_for_key(self, key: bytes) -> int:
        count = self.partitions or self.app.conf.topic_partitions
        return partition_for(self.session_of(key), count)

    def keys_from(self, partition: int, prefix: bytes) -> list[bytes]:
        return cast(RocksDBStore | MemoryStore, self.data).keys_from(partition, prefix)

    def items_from(self, partition: int, prefix: bytes) -> list[tuple[bytes, bytes]]:
        return cast(RocksDBStore | MemoryStore, self.data).items_from(partition, prefix)

    def keys_between(
        self, partition: int, low: bytes, high: bytes, limit: int | None = None
    ) -> list[bytes]:
        """Only for a table whose stores keep their keys in order (``memory_store``)."""
        return cast(RocksDBStore, self.data).keys_between(partition, low, high, limit)

    def _new_store_by_url(self, url: str | URL) -> StoreT[bytes, bytes]:
        scheme = URL(str(url)).scheme
        stores: dict[str, type[RocksDBStore] | type[MemoryStore]] = {
            "rocksdb": RocksDBStore,
            "memory": self.memory_store,
        }
        store = stores.get(scheme)
        if store is None:
            raise ValueError(f"store {url!r}: only rocksdb:// and memory:// are supported")
        return store(
            url,
            self.app,
            self,
            table_name=self.name,
            key_type=self.key_type,
            key_serializer=self.key_serializer,
            value_serializer=self.value_serializer,
            value_type=self.value_type,
            loop=self.loop,
            options=self.options,
        )

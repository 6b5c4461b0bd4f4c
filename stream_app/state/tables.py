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

import asyncio
from collections.abc import Callable
from typing import Any, cast

import rocksdict
from aiokafka import AIOKafkaProducer
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.structs import RecordMetadata
from faust.stores import memory, rocksdb
from faust.tables.table import Table
from faust.types import TP, StoreT
from yarl import URL

from stream_app.models.topics import partition_for
from stream_app.state.damaged import damaged, move_aside

# Faust opens each table partition's RocksDB with 64 MiB write buffers (three of them) and a
# 2 GiB block cache: a worker's 12 databases (3 tables x 4 partitions) could hold gigabytes.
# The state is small records read back by key, mostly from the worker's own memory of the
# sessions it works on: a few MiB a database is plenty, and memory no longer grows with
# the sessions held (issue 10 item 9, ``python -m bench --soak``).
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
    Kafka Streams' stores do. Puts take a third of the time (0.7 against 2.2 µs, 400 B,
    in a loop of puts)."""
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
        partition = self._partition(key)
        self._key_index[key] = partition
        self._db_for_partition(partition).put(key, value)

    def _get(self, key: bytes) -> bytes | None:
        value: bytes | None = self._db_for_partition(self._partition(key)).get(key)
        return value

    def _contains(self, key: bytes) -> bool:
        return self._get(key) is not None

    def _del(self, key: bytes) -> None:
        self._key_index.pop(key, None)
        self._db_for_partition(self._partition(key)).delete(key)

    def keys_from(self, partition: int, prefix: bytes) -> list[bytes]:
        """The keys of a partition that start with ``prefix``, in key order."""
        return [key for key, _ in self.items_from(partition, prefix)]

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
        self, *args: Any, session_of: Callable[[bytes], bytes] = bytes, **kwargs: Any
    ) -> None:
        self.session_of = session_of
        kwargs.setdefault("use_partitioner", True)
        kwargs.setdefault("key_type", bytes)
        kwargs.setdefault("value_type", bytes)
        kwargs["options"] = {**ROCKSDB_OPTIONS, **(kwargs.get("options") or {})}
        super().__init__(*args, **kwargs)
        #: Changelog records not yet handed to the producer: one record batch a partition.
        self._open: dict[int, BatchBuilder] = {}
        #: Record batches handed to the producer and not yet acknowledged: (partition,
        #: records in it, its delivery).
        self._sent: list[tuple[int, int, asyncio.Future[RecordMetadata]]] = []

    async def put(self, key: bytes, value: bytes | None) -> None:
        """Writes (``None``: deletes) a key, its changelog record into its partition's
        record batch, which goes to the producer once full or at ``written``.

        ``table[key] = value`` would queue the record in Faust's producer buffer, which a
        batch of writes fills: Faust's conductor then stops delivering records until the
        buffer drains, one record at a time; and Faust's producer flush, which it also
        runs before a commit, returns after 0.1 s with records still buffered. A record
        sent on its own (``producer.send``) cost a future, an accumulator lookup and a
        metadata wait each, most of a checkpoint's time (issue 21: 442 µs a changelog
        record through Faust's ``Topic.send``); a record appended to a batch the table
        builds costs the append, and the batch one acknowledgement. Records of a
        partition reach the changelog in the order they were put: its batches are handed
        over in order, and the producer sends one batch of a partition at a time.
        """
        if value is None:
            self.data.pop(key, None)
        else:
            self.data[key] = value
        partition = self.partition_for_key(key)
        batch = self._open.get(partition)
        if batch is None:
            batch = self._open[partition] = self._producer().create_batch()
        if batch.append(key=key, value=value, timestamp=None) is None:  # full
            await self._hand_over(partition)
            batch = self._open[partition] = self._producer().create_batch()
            batch.append(key=key, value=value, timestamp=None)  # a first record always fits

    async def written(self) -> None:
        """Hands over every open record batch and waits until the broker has every
        changelog record put so far, raising if it refused one; then notes each
        partition's last offset once, as Faust notes every record's (recovery reads the
        changelog on from there)."""
        for partition in list(self._open):
            await self._hand_over(partition)
        sent, self._sent = self._sent, []
        last: dict[TP, int] = {}
        for partition, records, delivery in sent:
            meta = await delivery
            tp = TP(meta.topic, partition)
            last[tp] = max(last.get(tp, -1), meta.offset + records - 1)  # a batch's base offset
        for tp, offset in last.items():
            self.data.set_persisted_offset(tp, offset)

    async def _hand_over(self, partition: int) -> None:
        batch = self._open.pop(partition)
        delivery = await self._producer().send_batch(
            batch, self.changelog_topic.get_topic_name(), partition=partition
        )
        self._sent.append((partition, batch.record_count(), delivery))

    def _producer(self) -> AIOKafkaProducer:
        """The aiokafka producer under Faust's (its ``_ensure_producer``, pinned)."""
        return cast(AIOKafkaProducer, self.app.producer._ensure_producer())  # type: ignore[attr-defined]

    def partition_for_key(self, key: bytes) -> int:
        count = self.partitions or self.app.conf.topic_partitions
        return partition_for(self.session_of(key), count)

    def keys_from(self, partition: int, prefix: bytes) -> list[bytes]:
        return cast(RocksDBStore | MemoryStore, self.data).keys_from(partition, prefix)

    def items_from(self, partition: int, prefix: bytes) -> list[tuple[bytes, bytes]]:
        return cast(RocksDBStore | MemoryStore, self.data).items_from(partition, prefix)

    def _new_store_by_url(self, url: str | URL) -> StoreT[bytes, bytes]:
        scheme = URL(str(url)).scheme
        store = {"rocksdb": RocksDBStore, "memory": MemoryStore}.get(scheme)
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

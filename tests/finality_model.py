"""The worker's path to the final topic, without Faust or a broker, for the tests of SPEC §8.

``ModelWorker`` is what the worker does with a partition's records: the core applies them
in place (``Pipeline``, closed turns kept in the state), ticks read the due index, the one
timer (a part of ``TableSessions``), and a checkpoint seals the sessions, writes them to the
tables, has
``Finalizer`` write the final records of the turns it closed, and only then commits the
offsets applied. The tables are dicts that outlive a worker, the topics lists; a crash is
a worker dropped (anywhere in a checkpoint's writes: ``Budget``), and the next one reads the
tables and the records again from the committed offsets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from stream_app.core import finality
from stream_app.core.policy import Policy
from stream_app.core.records import FinalTurn, Outputs, SourceRecord
from stream_app.state.due import DueIndex, OrderedKeys
from stream_app.state.final_keys import TableFinalKeys
from stream_app.state.sessions import TableSessions
from stream_app.worker.final_records import Finalizer
from stream_app.worker.pipeline import Pipeline


class Stopped(Exception):
    """The worker stopped: nothing it would write next reaches a table or a topic."""


@dataclass
class Budget:
    """Writes (table records and final records) left before the worker stops (None: no end)."""

    left: int | None = None

    def spend(self) -> None:
        if self.left is not None:
            if self.left <= 0:
                raise Stopped
            self.left -= 1


class DictTable:
    """A table as the store uses it, kept in a dict that outlives the worker; one partition.
    Its keys are also kept in order, as ``OrderedMemoryStore`` keeps them, for the due
    index's range reads (``steps`` counts the entries those reads look at)."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.data: dict[bytes, bytes] = {}
        self.order = OrderedKeys()
        self.puts = 0

    def get(self, key: bytes) -> bytes | None:
        return self.data.get(key)

    def __iter__(self) -> Iterator[bytes]:
        return iter(list(self.data))

    async def put(self, key: bytes, value: bytes | None) -> None:
        self.budget.spend()
        self.puts += 1
        if value is None:
            self.data.pop(key, None)
        else:
            self.data[key] = value
            self.order.add(key)

    async def written(self) -> None:
        pass

    def partition_for_key(self, key: bytes) -> int:
        return 0

    def keys_from(self, partition: int, prefix: bytes) -> list[bytes]:
        return sorted(k for k in self.data if k.startswith(prefix))

    def items_from(self, partition: int, prefix: bytes) -> list[tuple[bytes, bytes]]:
        return [(k, self.data[k]) for k in self.keys_from(partition, prefix)]

    def keys_between(
        self, partition: int, low: bytes, high: bytes, limit: int | None = None
    ) -> list[bytes]:
        return [k for k in self.order.below(high, self.data.__contains__, limit) if k >= low]


@dataclass
class Tables:
    """What survives a worker: its tables, its committed offsets, and the topics."""

    budget: Budget = field(default_factory=Budget)
    committed: dict[str, int] = field(default_factory=dict)  # source topic -> next offset
    turns: list[tuple[bytes, int, bytes]] = field(default_factory=list)  # key, revision, value
    finals: list[FinalTurn] = field(default_factory=list)
    dead_letters: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        b = self.budget
        self.heads, self.decisions, self.bodies = DictTable(b), DictTable(b), DictTable(b)
        self.entries, self.due, self.final_keys = DictTable(b), DictTable(b), DictTable(b)


class ModelWorker:
    def __init__(self, tables: Tables, policy: Policy, clock: list[float]) -> None:
        self.tables = tables
        t = tables
        self.store = TableSessions(
            t.heads,
            t.decisions,
            t.bodies,
            t.entries,
            policy.max_state_record_bytes,
            index=DueIndex(t.due, policy, finality.Timing(policy)),
            final_keys=TableFinalKeys(t.final_keys, partitions=1),
        )
        self.pipeline = Pipeline(policy, self.store, clock=lambda: clock[0], finals_now=False)
        self.finalizer = Finalizer(self.store, self._send, clock=lambda: clock[0])
        self.applied: dict[str, int] = dict(t.committed)  # next offset to apply, by topic

    async def _send(self, finals: list[FinalTurn]) -> None:
        for final in finals:
            self.tables.budget.spend()
            self.tables.finals.append(final)

    def _emit(self, out: Outputs) -> None:
        self.tables.turns += [(r.key_bytes, r.revision, r.value) for r in out.turns]
        self.tables.dead_letters += out.dead_letters
        assert out.finals == [], "the worker writes finals after its checkpoints only"

    def apply(self, record: SourceRecord) -> None:
        assert record.offset == self.applied.get(record.topic, 0), "read in order"
        self._emit(self.pipeline.process(record))
        self.applied[record.topic] = record.offset + 1

    def tick(self) -> None:
        self._emit(self.pipeline.tick(0))

    def checkpoint(self) -> None:
        asyncio.run(self._checkpoint())

    async def _checkpoint(self) -> None:
        snapshot = self.store.seal()
        applied = dict(self.applied)
        await self.store.write(snapshot)
        self.store.settled(snapshot)
        await self.finalizer.after_write(snapshot)
        self.tables.committed.update(applied)
        await self.store.release(snapshot)


def final_records(tables: Tables) -> dict[bytes, set[tuple[int, bytes, tuple[Any, ...]]]]:
    """Each key's distinct final records: (revision, value, headers)."""
    found: dict[bytes, set[tuple[int, bytes, tuple[Any, ...]]]] = {}
    for f in tables.finals:
        found.setdefault(f.key_bytes, set()).add((f.revision, f.value, tuple(f.headers)))
    return found


def unstamped(value: bytes) -> Any:
    return orjson.loads(value)

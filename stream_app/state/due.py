"""The due index: each session filed at its next instant (``core/finality.next_at``), the
earliest of its turns' late-decision windows and its own expiry.

A table beside the session tables, ``due``: one key per session, ``<instant><session id>``
where the instant is 8 bytes, big-endian milliseconds since the epoch, and the value is
empty. A key is filed in its session's partition, so a partition's keys sort by instant and
a tick reads them up to now in one range read (``keys_between``): what a tick costs follows
the sessions whose instant has come, never the sessions held. The tick is the only timer:
it closes turns and expires idle sessions alike.

The index is written with the sessions, at a checkpoint (``DueIndex``, a part composed into
the store, ``state/parts.py``; the instant a head names is the session's ``Written.due``): a
session whose instant changed since it was last written puts its new key before its head is
written, and deletes the one before after it; the head names the instant it put (``due``).
A worker stopped anywhere in between leaves at worst a key too many, never one missing: a
tick that reads a key its session no longer names, or whose session is gone, deletes it
(``DueIndex.read``). A key may be early, never late: a session whose instant is its expiry
and moves only later (a record of a session with no turn open) keeps its key, and the tick
that reads it early files it again at its instant, so a busy session costs an index write
per idle time, not one per checkpoint.

With ``memory://`` a table is Faust's dict, which has no order: ``OrderedMemoryStore`` also
keeps each partition's keys in a heap, rebuilt from the dict after a recovery and kept up by
every write. A read walks only the heap's entries below its bound (a key deleted is left
in the heap until it is the smallest, then dropped).
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from faust.types import TP, EventT

from stream_app.core.policy import Policy
from stream_app.core.session import EmittedTurn, SessionState
from stream_app.runtime.slices import Slices
from stream_app.state import entries
from stream_app.state.base import REACHED_COUNTED, Instants
from stream_app.state.closed import closings
from stream_app.state.entries import Head, StateFormatNewer, read_head
from stream_app.state.parts import Part, SealedSession
from stream_app.state.sessions import StateTable
from stream_app.state.tables import MemoryStore
from stream_app.state.written import Written

_INSTANT = struct.Struct(">Q")
INSTANT_BYTES = _INSTANT.size


def due_key(instant: float, session_id: str) -> bytes:
    """The index key of a session due at ``instant`` (epoch seconds; before 1970: 0)."""
    return _INSTANT.pack(_millis(instant)) + session_id.encode()


def _millis(instant: float) -> int:
    return min(max(0, int(instant * 1000)), 2**64 - 1)


def session_of_due(key: bytes) -> bytes:
    """The session id of an index key, which decides its partition."""
    return key[INSTANT_BYTES:]


def bound(now: float) -> bytes:
    """Every key below it is due at ``now`` or before (to the millisecond)."""
    return _INSTANT.pack(_millis(now) + 1)


class DueTable(StateTable, Protocol):
    """What the index asks of its table: ``state/tables.KeyPartitionedTable`` with
    ``OrderedMemoryStore`` for ``memory://``; a sorted stand-in in the tests."""

    def keys_between(
        self, partition: int, low: bytes, high: bytes, limit: int | None = None
    ) -> list[bytes]: ...


@dataclass
class IndexWrites:
    """What one checkpoint writes to the index."""

    put: list[bytes] = field(default_factory=list)  # before the heads
    delete: list[bytes] = field(default_factory=list)  # after them


class DueIndex(Part):
    """The due index (module docstring): a part of the worker's store (``state/parts.py``),
    composed into ``TableSessions``, which reads it for a tick (``reached``, ``read``) and
    tells it of each checkpoint; what it wrote of a session is the session's ``Written``."""

    def __init__(
        self, due: DueTable, policy: Policy, timing: Instants, partitions: int = 1
    ) -> None:
        self.due_table = due
        self.timing = timing
        self.partitions = partitions
        # Named in every head the store writes: a head's instant made under others is filed
        # again.
        self.window: float | None = policy.late_decision_window_seconds
        self.ttl: float | None = policy.session_ttl_seconds
        self._writes: dict[int, IndexWrites] = {}  # by snapshot number
        self._stale: set[bytes] = set()  # keys a tick found stale: deleted at the next seal
        # Live sessions whose written key is their expiry, which a record only moves later:
        # such a key is left early (module docstring) unless the session is in ``_refile``,
        # those a tick read before their instant.
        self._early_ok: set[str] = set()
        self._refile: set[str] = set()

    # -- reading ---------------------------------------------------------------------

    def reached(
        self, partition: int | None, now: float, limit: int | None = None
    ) -> tuple[list[tuple[str, bytes]], int]:
        """The sessions whose index key is reached by ``now`` in ``partition`` (None: every
        partition), the first ``limit``, with their keys: one range read of the index, which
        counts up to REACHED_COUNTED more (how many it left, the second)."""
        partitions: Iterable[int] = range(self.partitions) if partition is None else (partition,)
        high, read = bound(now), None if limit is None else limit + REACHED_COUNTED
        keys = [k for p in partitions for k in self.due_table.keys_between(p, b"", high, read)]
        left = 0 if limit is None else max(0, len(keys) - limit)
        return [(session_of_due(key).decode(), key) for key in keys[:limit]], left

    def read(
        self,
        key: bytes,
        state: SessionState | None,
        written: Written | None,
        closed: Mapping[str, EmittedTurn] | None,
    ) -> bool:
        """A tick read the session of ``key`` and left it as ``state``, with its ``closed``
        turns still to be written, whose head names what ``written`` says. A key whose
        session is gone, or that names another instant than its head, is deleted; whether
        the session is to be written at its instant by the next checkpoint (the key the tick
        read was early, or filed again at assignment)."""
        if not key:
            return False
        at_written = None if written is None else written.due
        if at_written is None or state is None or due_key(at_written, state.session_id) != key:
            self._stale.add(key)
        if state is None or closed is None:
            return False
        at = self.timing.next_at(state, closings(closed))
        if due_key(at, state.session_id) != key or at != at_written:
            self._refile.add(state.session_id)
            return True
        return False

    async def index_held(
        self,
        heads: StateTable,
        note_waiting: Callable[[str, int | None, Head], None],
        partitions: Iterable[int],
        now: float,
    ) -> int:
        """One pass over the heads of ``partitions`` once they are assigned, so that every
        session is filed at the instant the settings in force give it (``refile``): a head
        whose instant was made with another late-decision window or idle time (or none:
        written before the index, before heads named their window, or before the index
        held expiries) is filed again; one of a newer format raises ``StateFormatNewer``
        before anything is applied or written. Heads written by this release with these settings are
        recognised by their first bytes, not parsed, unless something waits in them: the
        pass notes those for the waiting report (``TableSessions.waits``). How many it
        filed again."""
        current = entries.head_prefix(self.window, self.ttl)
        pause = Slices()
        moves: list[tuple[str, float, float | None]] = []  # written once every head read
        for partition in partitions:
            for key, data in heads.items_from(partition, b""):
                await pause()
                fresh = data.startswith(current)
                if fresh and not entries.names_waiting(data):
                    continue
                try:
                    doc = read_head(data)
                    note_waiting(key.decode(), partition, doc)
                    if fresh:
                        continue
                    moved = refile(doc, self.timing)
                except StateFormatNewer as exc:
                    exc.key = key
                    raise
                except Exception:  # garbage: filed at once, for a tick's read to let it go
                    moved = (0.0, None)  # (``TableSessions._read``), as for any session
                if moved is not None:
                    moves.append((key.decode(), *moved))
        for session_id, at, before in moves:
            await self.due_table.put(due_key(at, session_id), b"")
            if before is not None:  # after the new one: never a session without
                await self.due_table.put(due_key(before, session_id), None)
            await pause()
        filed = len(moves)
        await self.due_table.written()
        return filed

    # -- a checkpoint's writes -------------------------------------------------------

    def sealing(self, number: int) -> None:
        writes = self._writes.setdefault(number, IndexWrites())
        writes.delete.extend(self._stale)
        self._stale = set()

    def seal_session(self, sealed: SealedSession) -> None:
        number, session_id = sealed.number, sealed.session_id
        state, written = sealed.state, sealed.written
        if state is None or written is None:
            self._early_ok.discard(session_id)
            return
        writes = self._writes.setdefault(number, IndexWrites())
        at, before = self.timing.next_at(state, closings(sealed.closed)), written.due
        early = before is not None and at > before and session_id in self._early_ok
        if at != before and (not early or session_id in self._refile):
            writes.put.append(due_key(at, session_id))
            if before is not None:
                writes.delete.append(due_key(before, session_id))
            written.due = at  # the head written now names it
            if at == self.timing.expires_at(state):
                self._early_ok.add(session_id)
            else:
                self._early_ok.discard(session_id)
        self._refile.discard(session_id)

    async def write_before(self, number: int) -> None:
        """The keys the checkpoint puts, acknowledged before its heads."""
        writes = self._writes.get(number) or IndexWrites()
        pause = Slices()
        for key in writes.put:
            await self.due_table.put(key, b"")
            await pause()
        await self.due_table.written()

    async def write_after(self, number: int) -> None:
        """The keys it deletes, after its heads, but any it also puts."""
        writes = self._writes.get(number) or IndexWrites()
        pause = Slices()
        put = set(writes.put)
        for key in writes.delete:
            if key not in put:
                await self.due_table.put(key, None)
                await pause()

    def released(self, number: int) -> None:
        self._writes.pop(number, None)

    def forget_all(self) -> None:
        """The stale keys found: their partitions may have moved (a later tick of the
        partition's owner finds them again)."""
        self._stale.clear()
        self._refile.clear()

    def let_go(self, session_id: str) -> None:
        self._early_ok.discard(session_id)  # read again, its key is moved when it changes


def refile(doc: Head, timing: Instants) -> tuple[float, float | None] | None:
    """Where a head's session belongs in the index under the settings in force, when that
    is not where its head says it was filed: (the instant, the one it was filed at or
    None), the session's next instant read off the head's last_seen, closed turns and
    oldest open turn."""
    closed = [(reason, at) for _, reason, at in doc.get("closed", ())]
    at = timing.next_at_of(doc["last_seen"], closed, doc.get("oldest"))
    before = doc.get("due")
    if at == before:
        return None
    return at, before


class OrderedKeys:
    """One partition's keys for reads from the lowest up: a binary heap, with a key deleted
    left in it until it is the smallest. ``steps`` counts the entries reads look at."""

    def __init__(self, keys: Iterable[bytes] = ()) -> None:
        self.heap = list(keys)
        heapq.heapify(self.heap)
        self.steps = 0

    def add(self, key: bytes) -> None:
        heapq.heappush(self.heap, key)

    def below(
        self, high: bytes, live: Callable[[bytes], bool], limit: int | None = None
    ) -> list[bytes]:
        """The live keys below ``high`` in order, the first ``limit`` of them. Walks the
        heap from its root, smallest first (a parent is never above its children): it
        looks at the keys it returns and at the one after them."""
        heap = self.heap
        while heap and not live(heap[0]):
            heapq.heappop(heap)
            self.steps += 1
        found: list[bytes] = []
        frontier = [(heap[0], 0)] if heap else []
        size = len(heap)
        while frontier and (limit is None or len(found) < limit):
            key, i = heapq.heappop(frontier)
            self.steps += 1
            if key >= high:
                break
            # A key deleted and written again is in the heap twice: the two come together.
            if live(key) and (not found or found[-1] != key):
                found.append(key)
            for child in (2 * i + 1, 2 * i + 2):
                if child < size:
                    heapq.heappush(frontier, (heap[child], child))
        return found


class OrderedMemoryStore(MemoryStore):
    """Faust's memory store whose partitions' keys are also kept in order (``OrderedKeys``):
    the due table's store with ``memory://``."""

    ordered: dict[int, OrderedKeys] | None = None  # None: to rebuild from ``data``

    def keys_between(
        self, partition: int, low: bytes, high: bytes, limit: int | None = None
    ) -> list[bytes]:
        """The due index starts its reads at its lowest key: ``low`` is b"" there."""
        live = self.data.__contains__
        return [key for key in self._ordered(partition).below(high, live, limit) if key >= low]

    def _ordered(self, partition: int) -> OrderedKeys:
        if self.ordered is None:
            by_partition: dict[int, list[bytes]] = {}
            for key in self.data:
                by_partition.setdefault(self._partition(key), []).append(key)
            self.ordered = {p: OrderedKeys(keys) for p, keys in by_partition.items()}
        keys = self.ordered.get(partition)
        if keys is None:
            keys = self.ordered[partition] = OrderedKeys()
        return keys

    def write(self, partition: int, key: bytes, value: bytes | None) -> None:
        super().write(partition, key, value)
        if value is not None and self.ordered is not None:
            self._ordered(partition).add(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        if self.ordered is not None:
            self._ordered(self._partition(key)).add(key)

    def apply_changelog_batch(
        self,
        batch: Iterable[EventT[Any]],
        to_key: Callable[[Any], Any],
        to_value: Callable[[Any], Any],
    ) -> None:
        super().apply_changelog_batch(batch, to_key, to_value)
        self.ordered = None  # recovery wrote the dict: the order is rebuilt at the next read

    async def on_recovery_completed(self, active_tps: set[TP], standby_tps: set[TP]) -> None:
        await super().on_recovery_completed(active_tps, standby_tps)
        self.ordered = None

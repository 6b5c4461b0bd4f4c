"""Session state in Faust tables: ``sessions`` (heads), ``entries``, ``turn_bodies`` and
``decisions`` (the collapse).

The worker applies records to decoded session states kept in memory (the most recently used
ones; a state is decoded from the tables once, not once per record or batch). At a
checkpoint the sessions changed since the last one are serialized at once, so what a later
batch changes cannot leak in, and that snapshot is written to the tables only after the
batches' turns and dead letters are acknowledged: a state that names a record as applied is
never on the changelog before what that record produced is on the broker. A session writes
its head and the entries it made or dropped (``state/entries.py``, whose rules E1-E4 make a
write that stops half-way harmless); the collapse entries travel with the snapshot.

Keys: ``sessions`` is keyed by the session id (UTF-8); ``decisions`` by the JSON array
``[session_id, natural_key]``, ``turn_bodies`` by ``[session_id, inference_call_id]`` (the
turn topic's key) and ``entries`` by ``[session_id, epoch, kind, n]``: unambiguous for any
ids, and filed in the session's partition.
"""

from __future__ import annotations

import logging
from collections import Counter, OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Protocol

import orjson

from stream_app.core import jsonbytes
from stream_app.core.records import turn_key
from stream_app.core.session import EmittedTurn, SessionState
from stream_app.models.turn import TurnBodyDict
from stream_app.observability import logs, metrics
from stream_app.runtime.slices import Slices, let_go
from stream_app.state import entries
from stream_app.state.base import FinalKeys, Instants, SessionStore
from stream_app.state.closed import ClosedTurns
from stream_app.state.entries import StateFormatNewer, Value
from stream_app.state.memory import MemoryFinalKeys
from stream_app.state.parts import Part, SealedSession
from stream_app.state.written import Written

if TYPE_CHECKING:
    from stream_app.state.due import DueIndex
    from stream_app.state.final_keys import TableFinalKeys

# Decoded states kept in memory once written: the sessions a worker is working on. Each
# holds its turns; one not kept is decoded again from the table when it is next read
# (the memory and the decoding it trades: docs/benchmarks.md).
LIVE_SESSIONS = 5_000


class StateTable(Protocol):
    """What the store asks of a table: ``state/tables.KeyPartitionedTable`` in the worker,
    a dict-backed stand-in in the tests and the benchmark."""

    def get(self, key: bytes, /) -> bytes | None: ...

    def __iter__(self) -> Iterator[bytes]: ...

    async def put(self, key: bytes, value: bytes | None) -> None: ...

    async def written(self) -> None: ...

    def partition_for_key(self, key: bytes) -> int: ...

    def keys_from(self, partition: int, prefix: bytes) -> list[bytes]: ...

    def items_from(self, partition: int, prefix: bytes) -> list[tuple[bytes, bytes]]: ...


# What waits in a session, as its head says: [when the oldest arrived, how many] of its
# pending messages and of its decisions waiting for their turn (None: none).
Waits = tuple[tuple[float, int] | None, tuple[float, int] | None]


def collapse_key(session_id: str, key: str) -> bytes:
    return jsonbytes.dumps([session_id, key])


def session_of(key: bytes) -> bytes:
    """The session id of a key of ``entries``, ``decisions`` or ``turn_bodies`` (a JSON array
    that starts with it): it decides the partition. Read off the key when the id's text
    holds no escape (orjson writes an id's own UTF-8 bytes then), else parsed: every table
    write and read asks it."""
    end = key.find(b'"', 2)
    if key.startswith(b'["') and end > 0 and key.find(b"\\", 2, end) < 0:
        return key[2:end]
    return str(orjson.loads(key)[0]).encode()


@dataclass
class Snapshot:
    """What one checkpoint writes, in the order ``TableSessions.write`` writes it."""

    number: int
    entries: dict[bytes, Value | None] = field(default_factory=dict)  # before the heads
    bodies: dict[bytes, Value] = field(default_factory=dict)  # turn key -> body, before
    sessions: dict[str, bytes | None] = field(default_factory=dict)  # heads; None: deleted
    after: list[bytes] = field(default_factory=list)  # entries deleted after the heads
    dropped_bodies: list[bytes] = field(default_factory=list)  # after the heads
    retired: list[tuple[str, int]] = field(default_factory=list)  # epochs gone, after
    forgotten: set[str] = field(default_factory=set)
    remembered: dict[bytes, str] = field(default_factory=dict)


class TableCollapse:
    """The collapse (``core/collapse.py``) over the ``decisions`` table.

    Entries of snapshots not yet written are read from an overlay, kept by batch.
    """

    def __init__(self, table: StateTable) -> None:
        self.table = table
        self._remembered: dict[bytes, tuple[str, int]] = {}  # entry -> first copy, batch
        self._forgotten: dict[str, int] = {}  # session -> the last batch that forgot it
        self._batches: dict[int, tuple[list[bytes], list[str]]] = {}  # remembered, forgotten
        self._batch = 0  # the open batch's number

    def first(self, session_id: str, key: str) -> str | None:
        entry = collapse_key(session_id, key)
        if entry in self._remembered:
            return self._remembered[entry][0]
        if session_id in self._forgotten:
            return None
        stored = self.table.get(entry)
        return None if stored is None else bytes(stored).decode()

    def remember(self, session_id: str, key: str, first: str) -> None:
        entry = collapse_key(session_id, key)
        kept = self._remembered.get(entry)
        if kept is None or kept[1] != self._batch:
            self._open()[0].append(entry)  # once a batch, whatever it sets it to
        self._remembered[entry] = (first, self._batch)

    def forget(self, session_id: str) -> None:
        self._forgotten[session_id] = self._batch
        self._open()[1].append(session_id)
        prefix = entries.session_prefix(session_id)
        for entry in [e for e in self._remembered if e.startswith(prefix)]:
            del self._remembered[entry]

    def _open(self) -> tuple[list[bytes], list[str]]:
        return self._batches.setdefault(self._batch, ([], []))

    def seal(self, snapshot: Snapshot) -> None:
        n = self._batch
        entries, sessions = self._batches.get(n, ([], []))
        snapshot.forgotten = set(sessions)
        snapshot.remembered = {
            e: kept[0] for e in entries if (kept := self._remembered.get(e)) and kept[1] == n
        }
        self._batch += 1

    async def write_remembered(self, snapshot: Snapshot) -> None:
        """The snapshot's new entries, acknowledged: written before the states they collapse
        copies for, so no state on the changelog lacks them."""
        pause = Slices()
        for entry, first in snapshot.remembered.items():
            await self.table.put(entry, first.encode())
            await pause()
        await self.table.written()

    async def write_forgotten(self, snapshot: Snapshot) -> None:
        """The entries of the snapshot's expired sessions: after their states are gone."""
        pause = Slices()
        for session_id in snapshot.forgotten:
            partition = self.table.partition_for_key(collapse_key(session_id, ""))
            for entry in self.table.keys_from(partition, entries.session_prefix(session_id)):
                if entry not in snapshot.remembered:
                    await self.table.put(entry, None)
                    await pause()

    def settled(self, snapshot: Snapshot) -> None:
        """The snapshot is in the table: its overlay entries are no longer needed."""
        n = snapshot.number
        entries, sessions = self._batches.pop(n, ([], []))
        for entry in entries:
            if (kept := self._remembered.get(entry)) is not None and kept[1] == n:
                del self._remembered[entry]
        for session_id in sessions:
            if self._forgotten.get(session_id) == n:
                del self._forgotten[session_id]


class TableSessions(SessionStore):
    """The sessions in their tables, with the parts composed beside them (``state/parts.py``):
    the due index when given one (the worker's), the final keys' table when given one, and
    the closed turns still to be written (``closed``, ``state/closed.py``)."""

    def __init__(
        self,
        table: StateTable,
        decisions: StateTable,
        bodies: StateTable,
        entries: StateTable,
        max_record_bytes: int,
        index: DueIndex | None = None,
        final_keys: TableFinalKeys | None = None,
    ) -> None:
        self.table = table
        self.bodies = bodies
        self.entries = entries
        self.max_record_bytes = max_record_bytes  # a state record past it is never sent
        self.collapse: TableCollapse = TableCollapse(decisions)
        # A table's in the worker; else remembered in memory only (tests).
        self.final_keys: FinalKeys = MemoryFinalKeys() if final_keys is None else final_keys
        self.index = index
        # Named in every head, with the due index's: a head's instant made under others is
        # filed again (``state/due.py``).
        self.window = None if index is None else index.window
        self.ttl = None if index is None else index.ttl
        self.closed = ClosedTurns()
        # Told of each step of a checkpoint, in this order (the index's keys, then the final
        # keys, are written before the heads and deleted after them).
        self.parts: list[Part] = [p for p in (index, final_keys, self.closed) if p is not None]
        # What waits, by partition and session, as the heads written (or read at assignment,
        # ``state/due.index_held``) say: the waiting report reads this, never every head.
        self.waits: dict[int, dict[str, Waits]] = {}
        self._waits_in: dict[str, int] = {}  # session -> its partition in ``waits``
        self._live: OrderedDict[str, SessionState | None] = OrderedDict()
        # What was written of each session in ``_live`` (``state/written.py``): a live
        # state's journal; for a session deleted, the epoch its next state takes (E3).
        self._written: dict[str, Written] = {}
        self._garbage: dict[str, list[bytes]] = {}  # found by a read, deleted at the seal
        self._retired: dict[str, set[int]] = {}  # epochs whose entries go after the head
        self._changed: set[str] = set()  # since the last seal
        self._sealing: set[str] = set()  # changed before the seal under way, not yet sealed
        self._snapshot = Snapshot(-1)  # the seal under way's (``begin_seal``)
        self._unwritten: Counter[str] = Counter()  # sealed, not yet written
        self._sealed = 0
        self._held = 0  # sessions held (``recount``)
        self._worked = False  # a session read or changed since ``forget_if_idle`` last asked

    def get(self, session_id: str) -> SessionState | None:
        self._worked = True
        self._seal_before_change(session_id)  # what it returns may be changed in place
        if session_id in self._live:
            self._live.move_to_end(session_id)
            return self._live[session_id]
        state, written, garbage, head, closed = self._read(session_id)
        self._live[session_id] = state
        self._written[session_id] = written
        self.closed.read(session_id, closed)
        if state is not None:
            state.journal = written
        if garbage:
            self._garbage[session_id] = garbage
            self._changed.add(session_id)
        if state is None and head:
            self._changed.add(session_id)  # an unreadable head: deleted at the next seal
        return state

    def read(
        self, session_id: str
    ) -> tuple[SessionState | None, Written, list[bytes], dict[str, EmittedTurn]]:
        """The session as the tables hold it (what the last settled batch wrote), what was
        written of it (its epoch, generation...), the garbage beside it (``state/entries.py``,
        E2 and E3), and its closed turns still to be written."""
        state, written, garbage, _, closed = self._read(session_id)
        return state, written, garbage, closed

    def _read(
        self, session_id: str
    ) -> tuple[SessionState | None, Written, list[bytes], bool, dict[str, EmittedTurn]]:
        """``read``, with whether a head was found (a head that does not decode is one)."""
        key = session_id.encode()
        data = self.table.get(key)
        partition = self.table.partition_for_key(key)
        items = self.entries.items_from(partition, entries.session_prefix(session_id))
        if data is None:
            return None, Written(), [key for key, _ in items], False, {}

        def body(call_id: str) -> TurnBodyDict | None:
            written = self.bodies.get(turn_key(session_id, call_id))
            if written is None:
                _lost(session_id, call_id)
                return None
            found: TurnBodyDict = orjson.loads(written)
            if not isinstance(found, dict):  # garbage: the session is read as unreadable
                raise TypeError(f"the body of turn {call_id!r} is not a JSON object")
            return found

        try:
            state, written, garbage, closed = entries.decode(data, items, body)
            return state, written, garbage, True, closed
        except StateFormatNewer as exc:
            exc.key = key
            raise  # never read as unreadable: that would delete a newer release's state
        except Exception as exc:  # garbage on a changelog, or state of another version
            _unreadable(session_id, exc)
            return None, Written(), [key for key, _ in items], True, {}

    def closed_of(self, session_id: str) -> Mapping[str, EmittedTurn]:
        return self.closed.of(session_id)

    def put(self, state: SessionState, closed: Iterable[EmittedTurn] = ()) -> None:
        self._worked = True
        session_id = state.session_id
        if session_id not in self._live:  # put unread (a record's put follows its get)
            self.get(session_id)  # what the tables hold of it is replaced (E3)
        self._seal_before_change(session_id)
        if not self._holds(session_id):
            self._held += 1
        if (old := self._live.get(session_id)) is not None and old is not state:
            self._replaced(session_id)  # expired and started again (E3)
        self.closed.hold(session_id, closed)
        written = self._written.get(session_id)
        if written is None or state.journal is not written:  # new here: written whole
            epoch = 0 if written is None else written.epoch
            whole = Written.whole(state, epoch, self.closed.of(session_id).values())
            state.journal = self._written[session_id] = whole
        self._live[session_id] = state
        self._live.move_to_end(session_id)
        self._changed.add(session_id)

    def sent(self, session_id: str, key: str) -> EmittedTurn | None:
        self._worked = True
        self._seal_before_change(session_id)
        assert self._live.get(session_id) is not None, "a session read before"
        turn = self.closed.take(session_id, key, self._written.get(session_id))
        if turn is not None:
            self._changed.add(session_id)
        return turn

    def _replaced(self, session_id: str) -> None:
        self.closed.let_go(session_id)  # its entries go with its epoch
        written = self._written.get(session_id)
        epoch = 0 if written is None else written.epoch
        self._retired.setdefault(session_id, set()).add(epoch)
        self._written[session_id] = Written(epoch + 1)

    def delete(self, session_id: str) -> None:
        self._worked = True
        self._seal_before_change(session_id)
        if self._holds(session_id):
            self._held -= 1
            self._replaced(session_id)  # a session that starts in this checkpoint is new
        self.closed.let_go(session_id)
        self._live[session_id] = None
        self._changed.add(session_id)

    def _holds(self, session_id: str) -> bool:
        if session_id in self._live:
            return self._live[session_id] is not None
        return self.table.get(session_id.encode()) is not None

    def session_ids(self) -> Iterator[str]:
        held = {key.decode() for key in self.table}
        held.update(s for s, state in self._live.items() if state is not None)
        return iter(sorted(held))

    def reached(
        self, partition: int | None, now: float, timing: Instants, limit: int | None = None
    ) -> list[tuple[str, bytes]]:
        """Read off the due index when the store has one (``DueIndex.reached``)."""
        if self.index is None:
            return super().reached(partition, now, timing, limit)
        found, self.reached_left = self.index.reached(partition, now, limit)
        return found

    def read_reached(self, key: bytes, state: SessionState | None, now: float) -> None:
        """The index's key read (``DueIndex.read``): a session it files again is changed."""
        if self.index is None:
            return
        written = closed = None
        if state is not None:
            written = self._written.get(state.session_id)
            closed = self.closed.of(state.session_id)
        if self.index.read(key, state, written, closed) and state is not None:
            self.put(state)

    async def index_held(self, partitions: Iterable[int], now: float) -> int:
        """Files the heads of ``partitions`` in the due index (``DueIndex.index_held``)."""
        assert self.index is not None, "a store with a due index"
        return await self.index.index_held(self.table, self.note_waiting, partitions, now)

    def note_waiting(self, session_id: str, partition: int | None, doc: entries.Head) -> None:
        """Notes what a head says waits in its session (nothing, for a head written before
        heads said, or one that does not read)."""
        try:
            pending, waiting = doc.get("pending"), doc.get("waiting")
            waits = (
                None if pending is None else (float(pending[0]), int(pending[1])),
                None if waiting is None else (float(waiting[0]), int(waiting[1])),
            )
        except (AttributeError, TypeError, ValueError, IndexError, KeyError):
            waits = (None, None)
        self._note(session_id, partition, waits)

    def _note(self, session_id: str, partition: int | None, waits: Waits | None) -> None:
        before = self._waits_in.pop(session_id, None)
        if before is not None:
            self.waits[before].pop(session_id, None)
        if waits is None or waits == (None, None):
            return
        if partition is None:
            partition = self.table.partition_for_key(session_id.encode())
        self.waits.setdefault(partition, {})[session_id] = waits
        self._waits_in[session_id] = partition

    def waits_in(self, partition: int) -> dict[str, Waits]:
        """What waits in the partition's sessions: as their heads say, and as the sessions
        changed since the last checkpoint hold it (their heads are not written yet)."""
        mine = self.table.partition_for_key
        for session_id in self._changed:
            state = self._live.get(session_id)
            if mine(session_id.encode()) == partition:
                waits = None if state is None else (state.messages_wait, state.decisions_wait)
                self._note(session_id, partition, waits)
        return self.waits.get(partition, {})

    def forget_waits(self, owned: Iterable[int]) -> None:
        """Forgets what waits in the partitions no longer ``owned``."""
        kept = set(owned)
        for partition in [p for p in self.waits if p not in kept]:
            for session_id in self.waits.pop(partition):
                self._waits_in.pop(session_id, None)

    def __len__(self) -> int:
        """Sessions held, as counted by ``recount`` and kept up to date by every change:
        counting the table's keys on every scrape of ``/metrics`` would hold on to memory
        in proportion to the sessions held."""
        return self._held

    def recount(self) -> int:
        """Counts the sessions held: those in the table, as the batches since changed them.
        After partitions moved (the table's keys are the new partitions')."""
        held = {key.decode() for key in self.table}
        for session_id in self._changed | self._sealing | set(self._unwritten):
            if self._live[session_id] is None:
                held.discard(session_id)
            else:
                held.add(session_id)
        self._held = len(held)
        return self._held

    def peek(self, session_id: str) -> tuple[SessionState | None, int, Mapping[str, EmittedTurn]]:
        """The session as applied so far, written or not, the generation last written of
        it, and its closed turns still to be written; nothing is kept in memory for it."""
        if session_id in self._live:
            written = self._written.get(session_id)
            generation = 0 if written is None else written.generation
            return self._live[session_id], generation, self.closed.of(session_id)
        state, written, _, closed = self.read(session_id)
        return state, written.generation, closed

    def seal(self) -> Snapshot:
        """What the sessions changed since the last seal write, serialized now (E1): for
        callers with no event loop to give back (``bench --bounded``, tests); the worker's
        checkpoints use ``begin_seal`` and ``finish_seal``."""
        snapshot = self.begin_seal()
        while self._sealing:
            self._seal_one(snapshot, next(iter(self._sealing)))
        return snapshot

    def begin_seal(self) -> Snapshot:
        """A snapshot of the sessions as they are now, serialized by ``finish_seal`` a slice
        at a time; a session the agent is about to change before then is serialized first
        (``get``, ``put``, ``delete``), so the snapshot holds each session as it was when
        the seal began, whatever is applied meanwhile. Sealing every changed session at
        once would hold the event loop for the whole checkpoint."""
        snapshot = Snapshot(self._sealed)
        self._sealed += 1
        self._sealing, self._changed = self._changed, set()
        self._snapshot = snapshot
        self.collapse.seal(snapshot)
        for part in self.parts:
            part.sealing(snapshot.number)
        return snapshot

    async def finish_seal(self, snapshot: Snapshot) -> None:
        pause = Slices()
        while self._sealing:
            self._seal_one(snapshot, next(iter(self._sealing)))
            await pause()

    def _seal_before_change(self, session_id: str) -> None:
        if session_id in self._sealing:
            self._seal_one(self._snapshot, session_id)

    def _seal_one(self, snapshot: Snapshot, session_id: str) -> None:
        state = self._live[session_id]
        written = None if state is None else self._written[session_id]
        closed = self.closed.of(session_id)
        for part in self.parts:
            part.seal_session(SealedSession(snapshot.number, session_id, state, written, closed))
        self._sealing.discard(session_id)
        garbage = self._garbage.pop(session_id, ())
        retired = self._retired.pop(session_id, ())
        snapshot.retired += [(session_id, epoch) for epoch in retired]
        if state is None:
            snapshot.entries.update(dict.fromkeys(garbage))
            snapshot.sessions[session_id] = None
            if session_id in self._waits_in:
                self._note(session_id, None, None)
        else:
            assert written is not None
            body_key = partial(turn_key, session_id)
            change = entries.changes(state, written, garbage, body_key, closed)
            dropped = change["dropped"]
            head = entries.head(state, written, dropped, self.window, self.ttl, closed.values())
            self._add(snapshot, session_id, change, head)
            waits = (state.messages_wait, state.decisions_wait)
            if waits != (None, None) or session_id in self._waits_in:
                self._note(session_id, None, waits)
        self._unwritten[session_id] += 1

    def _add(
        self, snapshot: Snapshot, session_id: str, change: entries.Changes, head: bytes
    ) -> None:
        snapshot.entries.update(change["before"])
        snapshot.bodies.update(change["bodies"])
        snapshot.sessions[session_id] = head
        snapshot.after += change["after"]
        snapshot.dropped_bodies += change["dropped_bodies"]

    async def write(self, snapshot: Snapshot) -> None:
        """Writes a snapshot to the tables (``state/entries.py``, E1).

        The changelogs are separate topics, and a worker stopped between two of them leaves
        one written and not the other; so what a head relies on is acknowledged before the
        head is sent: its entries and marks, its turn bodies, and its new collapse entries
        (else a state applied a decision whose later copies no entry collapses; an entry
        without its state is harmless: the record that wrote it finds itself there,
        ``core/collapse.first_copy``, and is applied again). What a head no longer names
        goes after it. Entries are serialized here, giving the event loop back every
        ``SLICE_SECONDS`` (``runtime/slices.py``), so a checkpoint never holds up the agent
        for long. The parts' records go around them (``state/parts.py``)."""
        for part in self.parts:
            await part.write_before(snapshot.number)
        pause = Slices()
        for key, value in snapshot.entries.items():
            await self.entries.put(key, self._fits(key, value))
            await pause()
        for key, body in snapshot.bodies.items():
            await self.bodies.put(key, self._fits(key, body))
            await pause()
        await self.collapse.write_remembered(snapshot)
        await self.entries.written()
        await self.bodies.written()
        for session_id, data in snapshot.sessions.items():
            await self.table.put(session_id.encode(), data)
            await pause()
        await self.table.written()
        for key in snapshot.after:
            await self.entries.put(key, None)
            await pause()
        for key in snapshot.dropped_bodies:
            await self.bodies.put(key, None)
            await pause()
        for session_id, epoch in snapshot.retired:
            partition = self.table.partition_for_key(session_id.encode())
            for key in self.entries.keys_from(partition, entries.epoch_prefix(session_id, epoch)):
                await self.entries.put(key, None)
                await pause()
        await self.collapse.write_forgotten(snapshot)
        for part in self.parts:
            await part.write_after(snapshot.number)

    def _fits(self, key: bytes, value: Value | None) -> bytes | None:
        """The record's bytes, checked against the producer's record limit: the limits keep
        every state record far below it, so one past it is a defect to log and count, not
        a crash; it is not sent (None: the key, new, is never written)."""
        data = value() if callable(value) else value
        if data is None or len(data) <= self.max_record_bytes:
            return data
        metrics.STATE_RECORDS_TOO_LARGE.inc()
        logs.event(
            "state_record_too_large",
            logging.ERROR,
            key=key[:200].decode(errors="replace"),
            bytes=len(data),
            limit=self.max_record_bytes,
        )
        return None

    def settled(self, snapshot: Snapshot) -> None:
        """The snapshot's changelog records are acknowledged: its states may be dropped
        (``evict``)."""
        for part in self.parts:
            part.written(snapshot.number)
        for session_id in snapshot.sessions:
            self._unwritten[session_id] -= 1
            if not self._unwritten[session_id]:
                del self._unwritten[session_id]
        self.collapse.settled(snapshot)

    async def release(self, snapshot: Snapshot) -> None:
        """Lets a settled snapshot go a slice at a time (``slices.let_go``). Its records,
        and the entries and turns only they still named, would otherwise be freed in one
        step, with the loop held, when the next seal replaced the snapshot."""
        for part in self.parts:
            part.released(snapshot.number)
        if self._snapshot is snapshot:
            self._snapshot = Snapshot(-1)
        s = snapshot
        await let_go(s.entries, s.bodies, s.sessions, s.remembered)
        await let_go(s.after, s.dropped_bodies, s.retired, s.forgotten)

    def forget_if_idle(self) -> bool:
        """Drops every decoded state that is written if no session was read or changed since
        the last call; whether it did. Kept after a burst they only pin memory: the few
        objects that outlive a burst keep the allocator from giving back the rest."""
        idle, self._worked = not self._worked, False
        if idle:
            self.forget_all()
        return idle

    def forget_all(self) -> None:
        """Drops every decoded state that is written: partitions moved, the tables rule."""
        for part in self.parts:
            part.forget_all()
        for session_id in [s for s in self._live if self._is_written(s)]:
            self._drop(session_id)

    async def evict(self) -> None:
        """Drops the decoded states past ``LIVE_SESSIONS`` that are written, the least
        recently used first (``get`` moves a session to the end), giving the loop back
        every slice (``runtime/slices.py``), as freeing thousands of decoded states with their turns
        and bodies in one step would hold it."""
        pause = Slices()
        for session_id in list(self._live):
            if len(self._live) <= LIVE_SESSIONS:
                break
            if session_id in self._live and self._is_written(session_id):
                self._drop(session_id)
            await pause()

    def _drop(self, session_id: str) -> None:
        del self._live[session_id]
        self._written.pop(session_id, None)
        for part in self.parts:
            part.let_go(session_id)

    def _is_written(self, session_id: str) -> bool:
        return not (
            session_id in self._changed
            or session_id in self._sealing
            or session_id in self._unwritten
        )


def _unreadable(session_id: str, exc: Exception) -> None:
    """A session's records that do not decode: a changelog written by hand or by another
    version. The session is read as absent (its records are deleted at the next
    checkpoint) rather than stopping the worker on every read of it."""
    metrics.STATE_UNREADABLE.inc()
    logs.event(
        "state_unreadable",
        logging.ERROR,
        session_id=session_id,
        error=f"{type(exc).__name__}: {exc}"[:500],
    )


def _lost(session_id: str, call_id: str) -> None:
    """A state names a turn whose body is not in ``turn_bodies``: bodies are acknowledged
    before the states that name them are written, so this is state from elsewhere (an
    older version, a hand-edited topic). The turn is left out rather than stopping the
    worker on every read: it was emitted already, and only late decisions miss it."""
    logs.event(
        "turn_body_missing",
        logging.ERROR,
        session_id=session_id,
        inference_call_id=call_id,
    )

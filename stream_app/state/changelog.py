"""Session state of the partitions this worker owns: in memory, every change in a changelog.

The changelog is a compacted topic with one partition per partition of the sessions topic.
Key ``<session id>`` holds the session's state without its turns' bodies; key
``<session id>\x00<inference_call_id>`` holds one turn's body, written once when the turn is
emitted (bodies are most of a long session's state, and they never change). A tombstone
is a deletion. Bodies go before the state that names them and their tombstones after it,
so a state read back always finds its bodies.

A worker that is given a partition reads that partition of the changelog before it applies
a single record, so state survives restarts and follows partitions from worker to worker.
State kept from an earlier assignment is caught up from where this worker last wrote,
instead of being read again from the beginning.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from stream_app.core.session import SessionState
from stream_app.models.topics import partition_for
from stream_app.state.base import SessionStore

SEPARATOR = b"\x00"  # between a session id and a turn's key: never in either


class ChangelogStore(SessionStore):
    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self._owned: dict[int, dict[str, SessionState]] = {}
        self._kept: dict[int, dict[str, SessionState]] = {}  # released, maybe given back
        # Changelog offset up to which each partition's sessions (owned or kept) are known.
        self.position: dict[int, int] = {}
        self._logged_turns: dict[str, set[str]] = {}  # session -> turns with a body logged
        # Sessions put or deleted since the last capture, and those whose log holds a body
        # their state does not name: what the next checkpoint writes.
        self.changed: set[str] = set()
        self._capture: Capture | None = None  # the latest checkpoint's

    def partition_of(self, session_id: str) -> int:
        return partition_for(session_id.encode(), self.partitions)

    def get(self, session_id: str) -> SessionState | None:
        self._before_use(session_id)
        sessions = self._owned.get(self.partition_of(session_id))
        return None if sessions is None else sessions.get(session_id)

    def put(self, state: SessionState) -> None:
        self._before_use(state.session_id)
        self._owned[self.partition_of(state.session_id)][state.session_id] = state
        self.changed.add(state.session_id)

    def delete(self, session_id: str) -> None:
        self._before_use(session_id)
        self._owned[self.partition_of(session_id)].pop(session_id, None)
        self.changed.add(session_id)

    def session_ids(self) -> Iterator[str]:
        return iter([s for sessions in self._owned.values() for s in sessions])

    def __len__(self) -> int:
        return sum(len(sessions) for sessions in self._owned.values())

    def owns(self, partition: int) -> bool:
        return partition in self._owned

    def release(self, partitions: Iterable[int]) -> None:
        for p in partitions:
            if p in self._owned:
                self._kept[p] = self._owned.pop(p)

    def capture(self) -> Capture:
        """The changelog records that bring the changed sessions up to date as they are now.

        They are serialized a few at a time (``Capture.drain``), so a checkpoint does not
        stop the loop; a session about to be read or changed first is serialized at once.
        """
        if self._capture is not None:
            self._capture.drain()  # the log keeps checkpoints in order
        self._capture = Capture(self, self.changed)
        self.changed = set()
        return self._capture

    def changes(self) -> list[tuple[int, bytes, bytes | None]]:
        """``capture``, serialized whole at once."""
        capture = self.capture()
        capture.drain()
        return capture.records

    def _serialize(self, session_id: str) -> list[tuple[int, bytes, bytes | None]]:
        p = self.partition_of(session_id)
        sessions = self._owned.get(p)
        state = None if sessions is None else sessions.get(session_id)
        key = session_id.encode()
        turns = set() if state is None else set(state.turns)
        logged = self._logged_turns.pop(session_id, set())
        records: list[tuple[int, bytes, bytes | None]] = []
        if state is not None:
            for call in turns - logged:
                body = orjson.dumps(state.turns[call].body)
                records.append((p, key + SEPARATOR + call.encode(), body))
        records.append((p, key, None if state is None else state.to_json(bodies=False)))
        records.extend((p, key + SEPARATOR + call.encode(), None) for call in logged - turns)
        if turns:
            self._logged_turns[session_id] = turns
        return records

    def _before_use(self, session_id: str) -> None:
        if self._capture is not None:
            self._capture.take(session_id)

    async def recover(self, consumer: AIOKafkaConsumer, topic: str, partitions: set[int]) -> int:
        """Reads the changelog of ``partitions`` to its end; returns the records read.

        The end is the high watermark of a fetch response: tansu's ListOffsets answers short
        of it when the last batch holds several records (``../shared/BROKER-NOTES.md``).
        """
        self.own(partitions)
        tps = {TopicPartition(topic, p) for p in partitions}
        if not tps:
            return 0
        consumer.assign(list(tps))
        for tp in tps:
            if tp.partition in self.position:
                consumer.seek(tp, self.position[tp.partition])
            else:
                await consumer.seek_to_beginning(tp)
        read: list[tuple[bytes, bytes | None]] = []
        pending = set(tps)
        while pending:
            batches = await consumer.getmany(*pending, timeout_ms=200)
            for tp, records in batches.items():
                read.extend((record.key, record.value) for record in records)
                self.position[tp.partition] = records[-1].offset + 1
            for tp in list(pending):
                end = consumer.highwater(tp)
                if end is not None and await consumer.position(tp) >= end:
                    self.position[tp.partition] = end
                    pending.discard(tp)
        consumer.unsubscribe()
        self.load(read)
        return len(read)

    def own(self, partitions: Iterable[int]) -> None:
        """Takes partitions on, with the state kept from owning them before, if any."""
        for p in partitions:
            self._owned[p] = self._kept.pop(p, {})

    def load(self, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Applies changelog records (key, value) of owned partitions, in log order."""
        heads: dict[str, bytes | None] = {}  # the latest of each
        bodies: dict[tuple[str, str], bytes | None] = {}
        for key, value in records:
            owner, _, call = key.partition(SEPARATOR)
            if call:
                bodies[owner.decode(), call.decode()] = value
            else:
                heads[owner.decode()] = value
        for session_id, head in heads.items():
            sessions = self._owned[self.partition_of(session_id)]
            if head is None:
                sessions.pop(session_id, None)
                self._logged_turns.pop(session_id, None)
                continue
            known = sessions.get(session_id)

            def body(call: str, s: str = session_id, known: Any = known) -> dict[str, Any]:
                logged = bodies.get((s, call))
                found: dict[str, Any] = orjson.loads(logged) if logged else known.turns[call].body
                return found

            state = SessionState.from_json(head, bodies=body)
            sessions[session_id] = state
            self._logged_turns[session_id] = set(state.turns)
        # A body no state names: its writer stopped between the body and the state. Counted
        # as logged, so the session's next changes tombstone it.
        for (named, turn), value in bodies.items():
            holder = self.get(named)
            if value is not None and (holder is None or turn not in holder.turns):
                self._logged_turns.setdefault(named, set()).add(turn)
                self.changed.add(named)


class Capture:
    """A checkpoint's changelog records, serialized as the sessions were when it was taken."""

    def __init__(self, store: ChangelogStore, session_ids: set[str]) -> None:
        self.store = store
        self.pending = sorted(session_ids, reverse=True)  # popped from the end, in order
        self.waiting = set(session_ids)
        self.records: list[tuple[int, bytes, bytes | None]] = []

    def take(self, session_id: str) -> None:
        if session_id in self.waiting:
            self.waiting.discard(session_id)
            self.records.extend(self.store._serialize(session_id))

    def drain(self, most: int | None = None) -> bool:
        """Serializes up to ``most`` sessions (all by default); whether any are left."""
        n = 0
        while self.pending and (most is None or n < most):
            session_id = self.pending.pop()
            if session_id in self.waiting:
                self.take(session_id)
                n += 1
        return bool(self.pending)

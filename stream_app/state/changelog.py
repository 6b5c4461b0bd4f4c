"""Session state of the partitions this worker owns: in memory, every change in a changelog.

The changelog is a compacted topic with one partition per partition of the sessions topic,
keyed by session id; a value is a session's state as JSON and a tombstone is its deletion.
A worker that is given a partition reads that partition of the changelog before it applies
a single record, so state survives restarts and follows partitions from worker to worker.
State kept from an earlier assignment is caught up from where this worker last wrote,
instead of being read again from the beginning.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from aiokafka import AIOKafkaConsumer, TopicPartition

from stream_app.core.session import SessionState
from stream_app.models.topics import partition_for
from stream_app.state.base import SessionStore


class ChangelogStore(SessionStore):
    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self._owned: dict[int, dict[str, SessionState]] = {}
        self._kept: dict[int, dict[str, SessionState]] = {}  # released, maybe given back
        # Changelog offset up to which each partition's sessions (owned or kept) are known.
        self.position: dict[int, int] = {}

    def partition_of(self, session_id: str) -> int:
        return partition_for(session_id.encode(), self.partitions)

    def get(self, session_id: str) -> SessionState | None:
        sessions = self._owned.get(self.partition_of(session_id))
        return None if sessions is None else sessions.get(session_id)

    def put(self, state: SessionState) -> None:
        self._owned[self.partition_of(state.session_id)][state.session_id] = state

    def delete(self, session_id: str) -> None:
        self._owned[self.partition_of(session_id)].pop(session_id, None)

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

    async def recover(self, consumer: AIOKafkaConsumer, topic: str, partitions: set[int]) -> int:
        """Reads the changelog of ``partitions`` to its end; returns the records read.

        The end is the high watermark of a fetch response: tansu's ListOffsets answers short
        of it when the last batch holds several records (``../shared/BROKER-NOTES.md``).
        """
        tps = {TopicPartition(topic, p) for p in partitions}
        if not tps:
            return 0
        for p in partitions:
            self._owned[p] = self._kept.pop(p, {})
        consumer.assign(list(tps))
        for tp in tps:
            if tp.partition in self.position:
                consumer.seek(tp, self.position[tp.partition])
            else:
                await consumer.seek_to_beginning(tp)
        read = 0
        pending = set(tps)
        while pending:
            batches = await consumer.getmany(*pending, timeout_ms=200)
            for tp, records in batches.items():
                sessions = self._owned[tp.partition]
                for record in records:
                    key = record.key.decode()
                    if record.value is None:
                        sessions.pop(key, None)
                    else:
                        sessions[key] = SessionState.from_json(record.value)
                    self.position[tp.partition] = record.offset + 1
                read += len(records)
            for tp in list(pending):
                end = consumer.highwater(tp)
                if end is not None and await consumer.position(tp) >= end:
                    self.position[tp.partition] = end
                    pending.discard(tp)
        consumer.unsubscribe()
        return read

"""A batch's view of a store: which sessions the batch changed, each named once.

The worker writes a batch's new and deleted sessions to its store after the broker has
acknowledged the batch's turns and dead letters, and hands ``writes`` to the next
checkpoint, however many of the batch's records touched a session. (A session already held
changes in place as it is applied: a batch that fails stops the worker, whose successor
starts from the changelog, which the failed batch never reached.)
"""

from __future__ import annotations

from collections.abc import Iterator

from stream_app.core.session import SessionState
from stream_app.state.base import SessionStore


class BatchStore(SessionStore):
    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self._read: dict[str, SessionState | None] = {}
        self._changed: set[str] = set()

    def get(self, session_id: str) -> SessionState | None:
        if session_id not in self._read:
            self._read[session_id] = self.store.get(session_id)
        return self._read[session_id]

    def put(self, state: SessionState) -> None:
        self._read[state.session_id] = state
        self._changed.add(state.session_id)

    def delete(self, session_id: str) -> None:
        self._read[session_id] = None
        self._changed.add(session_id)

    def session_ids(self) -> Iterator[str]:
        read = self._read
        yield from [s for s, state in read.items() if state is not None]
        yield from (s for s in self.store.session_ids() if s not in read)

    def __len__(self) -> int:
        return sum(1 for _ in self.session_ids())

    def writes(self) -> Iterator[tuple[str, SessionState | None]]:
        """Each changed session once: its new state, or ``None`` where it was deleted."""
        return ((s, self._read[s]) for s in sorted(self._changed))

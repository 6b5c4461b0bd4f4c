"""Session state in a Faust table: local reads, writes logged to a changelog topic.

Faust writes a key's changelog record to the partition of the event being processed, so
``put`` and ``delete`` must run inside the stream iteration of an event of that session's
partition, as the worker's agent does.

Decoded states of recently used sessions are kept in memory, so a busy session is not
parsed again for each of its records; the table stays the source of truth, and the cache
is dropped whenever partitions move (``forget``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from stream_app.core.session import SessionState
from stream_app.state.base import SessionStore


class TableStore(SessionStore):
    def __init__(self, table: Any, cached_sessions: int = 20_000) -> None:
        self.table = table
        self.cached_sessions = cached_sessions
        self._cache: OrderedDict[str, SessionState] = OrderedDict()

    def forget(self) -> None:
        self._cache.clear()

    def get(self, session_id: str) -> SessionState | None:
        state = self._cache.get(session_id)
        if state is not None:
            self._cache.move_to_end(session_id)
            return state
        data = self.table.get(session_id.encode())
        return None if data is None else self._remember(SessionState.from_json(data))

    def put(self, state: SessionState) -> None:
        self.table[state.session_id.encode()] = state.to_json()
        self._remember(state)

    def delete(self, session_id: str) -> None:
        self._cache.pop(session_id, None)
        self.table.pop(session_id.encode(), None)

    def session_ids(self) -> Iterator[str]:
        return (key.decode() for key in list(self.table.keys()))

    def __len__(self) -> int:
        return len(self.table)

    def _remember(self, state: SessionState) -> SessionState:
        self._cache[state.session_id] = state
        self._cache.move_to_end(state.session_id)
        if len(self._cache) > self.cached_sessions:
            self._cache.popitem(last=False)
        return state

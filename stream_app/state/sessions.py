"""Session state in the ``sessions`` Faust table, read and written once per batch.

A batch decodes each session it touches once and writes it back once, after the batch's
turns and dead letters are acknowledged: a state that names a record as applied is never
on the changelog before what that record produced is on the broker.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from stream_app.core.session import SessionState
from stream_app.state.base import SessionStore


class TableSessions(SessionStore):
    def __init__(self, table: Any) -> None:
        self.table = table
        self._loaded: dict[str, SessionState | None] = {}  # decoded or changed in this batch
        self._changed: set[str] = set()

    def get(self, session_id: str) -> SessionState | None:
        if session_id not in self._loaded:
            data = self.table.get(session_id.encode())
            # The core updates the state it is given, so it is decoded once per batch.
            self._loaded[session_id] = None if data is None else SessionState.from_json(data)
        return self._loaded[session_id]

    def put(self, state: SessionState) -> None:
        self._loaded[state.session_id] = state
        self._changed.add(state.session_id)

    def delete(self, session_id: str) -> None:
        self._loaded[session_id] = None
        self._changed.add(session_id)

    def session_ids(self) -> Iterator[str]:
        held = {key.decode() for key in self.table}
        return iter(sorted(held | self._changed))

    def __len__(self) -> int:
        return len(self.table)

    def write(self) -> int:
        """Writes every session the batch changed (a changelog record each); returns how many."""
        for session_id in self._changed:
            key = session_id.encode()
            state = self._loaded[session_id]
            if state is None:
                self.table.pop(key, None)
            else:
                self.table[key] = state.to_json()
        written = len(self._changed)
        self._changed.clear()
        self._loaded.clear()
        return written

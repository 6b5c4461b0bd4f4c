"""Session state in a Faust table: local reads, writes logged to a changelog topic.

Faust writes a key's changelog record to the partition of the event being processed, so
``put`` and ``delete`` must run inside the stream iteration of an event of that session's
partition, as the worker's agents do.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from stream_app.core.session import SessionState
from stream_app.state.base import SessionStore


class TableStore(SessionStore):
    def __init__(self, table: Any) -> None:
        self.table = table

    def get(self, session_id: str) -> SessionState | None:
        data = self.table.get(session_id.encode())
        return None if data is None else SessionState.from_json(data)

    def put(self, state: SessionState) -> None:
        self.table[state.session_id.encode()] = state.to_json()

    def delete(self, session_id: str) -> None:
        self.table.pop(session_id.encode(), None)

    def session_ids(self) -> Iterator[str]:
        return (key.decode() for key in list(self.table.keys()))

    def __len__(self) -> int:
        return len(self.table)

"""Session state in the ``sessions`` and ``decisions`` Faust tables, written once per batch.

A batch decodes each session it touches once and writes it back once, after the batch's
turns and dead letters are acknowledged: a state that names a record as applied is never
on the changelog before what that record produced is on the broker. The collapse entries a
batch adds or drops wait for the same moment.

Keys: ``sessions`` is keyed by the session id (UTF-8); ``decisions`` by the JSON array
``[session_id, natural_key]``, unambiguous for any id, and filed in the session's partition.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from stream_app.core.session import SessionState
from stream_app.state.base import SessionStore


def collapse_key(session_id: str, key: str) -> bytes:
    return orjson.dumps([session_id, key])


def session_of(collapse_key: bytes) -> bytes:
    """The session id of a ``decisions`` key, which decides its partition."""
    return str(orjson.loads(collapse_key)[0]).encode()


class TableCollapse:
    """The collapse (``core/collapse.py``) in a table; changes wait for ``write``."""

    def __init__(self, table: Any) -> None:
        self.table = table
        self._remembered: dict[bytes, str] = {}
        self._forgotten: set[str] = set()

    def first(self, session_id: str, key: str) -> str | None:
        entry = collapse_key(session_id, key)
        if entry in self._remembered:
            return self._remembered[entry]
        if session_id in self._forgotten:
            return None
        stored = self.table.get(entry)
        return None if stored is None else bytes(stored).decode()

    def remember(self, session_id: str, key: str, decision_id: str) -> None:
        self._remembered.setdefault(collapse_key(session_id, key), decision_id)

    def forget(self, session_id: str) -> None:
        self._forgotten.add(session_id)
        prefix = _prefix(session_id)
        for entry in [e for e in self._remembered if e.startswith(prefix)]:
            del self._remembered[entry]

    def write(self) -> None:
        for session_id in self._forgotten:
            partition = self.table.partition_for_key(collapse_key(session_id, ""))
            for entry in self.table.keys_from(partition, _prefix(session_id)):
                if entry not in self._remembered:
                    self.table.pop(entry, None)
        for entry, decision_id in self._remembered.items():
            self.table[entry] = decision_id.encode()
        self._remembered.clear()
        self._forgotten.clear()


def _prefix(session_id: str) -> bytes:
    """What every ``decisions`` key of the session, and no other, starts with."""
    return orjson.dumps([session_id])[:-1] + b","


class TableSessions(SessionStore):
    def __init__(self, table: Any, decisions: Any) -> None:
        self.table = table
        self.collapse: TableCollapse = TableCollapse(decisions)
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
        self.collapse.write()
        return written

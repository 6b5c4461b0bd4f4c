"""The store the pipeline keeps session state in; one value per session id."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Protocol

from stream_app.core import finality
from stream_app.core.collapse import Collapse
from stream_app.core.expiry import state_due_at
from stream_app.core.policy import Policy
from stream_app.core.session import SessionState

# How many sessions due beyond its limit a read of the due index counts (``due_left``).
DUE_COUNTED = 1_000


class FinalKeys(Protocol):
    """What the pipeline asks of the keys that went final."""

    def went_final(self, session_id: str, call_id: str) -> bool: ...

    def remember(self, session_id: str, call_id: str, now: float) -> None: ...

    def forget_old(self, partition: int | None, now: float, policy: Policy) -> int:
        """Forgets the keys past their horizon, then the oldest past the limit, of one
        partition (None: all); how many it forgot early, past the limit."""

    def held(self) -> int:
        """How many keys are remembered, as the last ``forget_old`` counted them."""


class SessionStore(ABC):
    collapse: Collapse  # the decisions of these sessions collapsed so far
    final_keys: FinalKeys  # the turn keys that went final (``state/final_keys.py``)
    # Sessions due that the last ``due`` left out past its limit, counted up to DUE_COUNTED.
    due_left = 0

    @abstractmethod
    def get(self, session_id: str) -> SessionState | None: ...

    @abstractmethod
    def put(self, state: SessionState) -> None: ...

    @abstractmethod
    def delete(self, session_id: str) -> None: ...

    @abstractmethod
    def session_ids(self) -> Iterator[str]:
        """The sessions this store holds (for a worker: those of its own partitions)."""

    @abstractmethod
    def __len__(self) -> int: ...

    def due(
        self, partition: int | None, now: float, policy: Policy, limit: int | None = None
    ) -> list[tuple[str, bytes]]:
        """The sessions a tick has work for by ``now`` (``core/finality.due``), the first
        ``limit``, each with its entry in the store's due index (``due_read`` is given it
        back). This one reads every session: a store that keeps an index
        (``state/due.py``) reads only those due."""
        due = []
        for session_id in self.session_ids():
            state = self.get(session_id)
            if state is not None and (at := finality.due(state, policy)) is not None and at < now:
                due.append((session_id, b""))
        self.due_left = 0 if limit is None else min(DUE_COUNTED, max(0, len(due) - limit))
        return due[:limit]

    def due_read(self, key: bytes, state: SessionState | None) -> None:
        """A tick has read the session of the due entry ``key``, and left it as ``state``
        (a store without an index has nothing to do)."""
        return None

    def due_at(self, session_id: str, policy: Policy) -> float | None:
        """When the session next needs expiring (``core/expiry.due_at``); None: not held.
        A store that can tell without decoding the whole state should: a sweep asks it of
        every session."""
        state = self.get(session_id)
        return None if state is None else state_due_at(state, policy)

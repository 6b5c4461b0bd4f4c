"""The store the pipeline keeps session state in; one value per session id."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator

from stream_app.core.collapse import Collapse
from stream_app.core.expiry import state_due_at
from stream_app.core.policy import Policy
from stream_app.core.session import SessionState


class SessionStore(ABC):
    collapse: Collapse  # the decisions of these sessions collapsed so far

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

    def due_at(self, session_id: str, policy: Policy) -> float | None:
        """When the session next needs expiring (``core/expiry.due_at``); None: not held.
        A store that can tell without decoding the whole state should: a sweep asks it of
        every session."""
        state = self.get(session_id)
        return None if state is None else state_due_at(state, policy)

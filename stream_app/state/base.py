"""The store the pipeline keeps session state in; one value per session id."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from typing import Protocol

from stream_app.core.collapse import Collapse
from stream_app.core.policy import Policy
from stream_app.core.session import Closed, EmittedTurn, SessionState
from stream_app.state.closed import closings

# How many sessions reached beyond its limit a read of the index counts (``reached_left``).
REACHED_COUNTED = 1_000


class Instants(Protocol):
    """The core's rule for a session's next instant (``core/finality.Timing``), given to the
    store: state/ files sessions by it and keeps no timing rule of its own."""

    def next_at(self, state: SessionState, closed: Iterable[Closed]) -> float:
        """``closed``: the (reason, final_after) of the session's closed turns still to be
        written (``state/closed.closings``)."""

    def expires_at(self, state: SessionState) -> float: ...

    def next_at_of(
        self, last_seen: float, closed: Iterable[tuple[str, float]], oldest_emitted: float | None
    ) -> float: ...


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
    # Sessions reached that the last ``reached`` left out past its limit, counted up to
    # REACHED_COUNTED.
    reached_left = 0

    @abstractmethod
    def get(self, session_id: str) -> SessionState | None: ...

    @abstractmethod
    def put(self, state: SessionState, closed: Iterable[EmittedTurn] = ()) -> None:
        """Keeps the session, and ``closed``, turns of it a step closed (``Outputs.closed``),
        until their final records are written (``sent``)."""

    @abstractmethod
    def closed_of(self, session_id: str) -> Mapping[str, EmittedTurn]:
        """The session's closed turns still to be written, in the order they closed."""

    @abstractmethod
    def sent(self, session_id: str, key: str) -> EmittedTurn | None:
        """The closed turn ``key`` of a session read before has its final record written: it
        is dropped, and its entries (None: it was not held)."""

    @abstractmethod
    def delete(self, session_id: str) -> None: ...

    @abstractmethod
    def session_ids(self) -> Iterator[str]:
        """The sessions this store holds (for a worker: those of its own partitions)."""

    @abstractmethod
    def __len__(self) -> int: ...

    def reached(
        self, partition: int | None, now: float, timing: Instants, limit: int | None = None
    ) -> list[tuple[str, bytes]]:
        """The sessions whose next instant (``timing.next_at``) ``now`` has passed, the first
        ``limit``, each with its key in the store's index (``read_reached`` is given it back).
        This one reads every session: a store that keeps an index (``state/due.py``) reads
        only those reached."""
        reached = []
        for session_id in self.session_ids():
            state = self.get(session_id)
            closed = closings(self.closed_of(session_id))
            if state is not None and timing.next_at(state, closed) < now:
                reached.append((session_id, b""))
        left = 0 if limit is None else min(REACHED_COUNTED, max(0, len(reached) - limit))
        self.reached_left = left
        return reached[:limit]

    def read_reached(self, key: bytes, state: SessionState | None, now: float) -> None:
        """A tick has read the session of the index key ``key`` at ``now``, and left it as
        ``state`` (a store without an index has nothing to do)."""
        return None

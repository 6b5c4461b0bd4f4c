"""Session state in a dict: for replay, tests and benchmarks of the core."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator

from stream_app.core.policy import Policy
from stream_app.core.session import EmittedTurn, SessionState
from stream_app.state.base import SessionStore


class MemoryCollapse:
    def __init__(self) -> None:
        self._first: dict[str, dict[str, str]] = {}  # session -> natural key -> first copy

    def first(self, session_id: str, key: str) -> str | None:
        return self._first.get(session_id, {}).get(key)

    def remember(self, session_id: str, key: str, first: str) -> None:
        self._first.setdefault(session_id, {})[key] = first

    def forget(self, session_id: str) -> None:
        self._first.pop(session_id, None)


class MemoryFinalKeys:
    """The keys in a dict, in the order they went final: replay, tests and benchmarks."""

    def __init__(self) -> None:
        self._at: OrderedDict[tuple[str, str], float] = OrderedDict()

    def went_final(self, session_id: str, call_id: str) -> bool:
        return (session_id, call_id) in self._at

    def remember(self, session_id: str, call_id: str, now: float) -> None:
        self._at.setdefault((session_id, call_id), now)

    def forget_old(self, partition: int | None, now: float, policy: Policy) -> int:
        at, oldest = self._at, now - policy.final_keys_horizon
        while at and next(iter(at.values())) < oldest:
            at.popitem(last=False)
        early = max(0, len(at) - policy.max_final_keys)
        for _ in range(early):
            at.popitem(last=False)
        return early

    def held(self) -> int:
        return len(self._at)


class MemorySessions(SessionStore):
    """Sessions kept as decoded states in a dict, the counterpart of ``TableSessions``
    (``state/tables.MemoryStore`` is something else: Faust's in-memory table store)."""

    def __init__(self) -> None:
        self._sessions: dict[str, SessionState] = {}
        self.collapse = MemoryCollapse()
        self.final_keys = MemoryFinalKeys()

    def get(self, session_id: str) -> SessionState | None:
        return self._sessions.get(session_id)

    def put(self, state: SessionState) -> None:
        made, _ = state.take_changes()  # nothing to write: the dict is the store
        for entry in made.values():
            if isinstance(entry, EmittedTurn):
                entry.messages_json = None  # kept for a body write that never comes
        self._sessions[state.session_id] = state

    def delete(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def session_ids(self) -> Iterator[str]:
        return iter(list(self._sessions))

    def __len__(self) -> int:
        return len(self._sessions)

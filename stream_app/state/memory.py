"""Session state in a dict: for replay, tests and benchmarks of the core."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping

from stream_app.core.policy import Policy
from stream_app.core.session import EmittedTurn, Entry, SessionState
from stream_app.state.base import SessionStore
from stream_app.state.closed import ClosedTurns


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


class NewTurns:
    """The journal of every state a ``MemorySessions`` holds: nothing is written, so it
    notes only the turns made, whose messages' JSON, kept for a body write
    (``EmittedTurn.body_json``) that never comes here, the next ``put`` lets go."""

    __slots__ = ("turns",)

    def __init__(self) -> None:
        self.turns: list[EmittedTurn] = []

    def made(self, n: int, entry: Entry) -> None:
        if type(entry) is EmittedTurn:
            self.turns.append(entry)

    def dropped(self, n: int, entry: Entry) -> None:
        return None

    def let_go(self, turns: Iterable[EmittedTurn]) -> None:
        for turn in turns:
            turn.messages_json = None
        self.turns.clear()


class MemorySessions(SessionStore):
    """Sessions kept as decoded states in a dict, the counterpart of ``TableSessions``
    (``state/tables.MemoryStore`` is something else: Faust's in-memory table store)."""

    def __init__(self) -> None:
        self._sessions: dict[str, SessionState] = {}
        self.collapse = MemoryCollapse()
        self.final_keys = MemoryFinalKeys()
        self._journal = NewTurns()
        # The closed turns still to be written: none in replay, which writes them at once.
        self._closed = ClosedTurns()

    def get(self, session_id: str) -> SessionState | None:
        return self._sessions.get(session_id)

    def put(self, state: SessionState, closed: Iterable[EmittedTurn] = ()) -> None:
        journal = self._journal  # nothing to write: the dict is the store
        session_id = state.session_id
        self._closed.hold(session_id, closed)
        if state.journal is journal:
            journal.let_go(journal.turns)
        else:  # new here: every turn it holds is new
            held = self._closed.of(session_id).values()
            journal.let_go([*journal.turns, *state.turns.values(), *held])
            state.journal = journal
        self._sessions[session_id] = state

    def closed_of(self, session_id: str) -> Mapping[str, EmittedTurn]:
        return self._closed.of(session_id)

    def sent(self, session_id: str, key: str) -> EmittedTurn | None:
        return self._closed.take(session_id, key, None)

    def delete(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
        self._closed.let_go(session_id)

    def session_ids(self) -> Iterator[str]:
        return iter(list(self._sessions))

    def __len__(self) -> int:
        return len(self._sessions)

"""The closed turns waiting for their final records: the store's record of them, by session, a
part of the store (``state/parts.py``) beside the due index rather than inside it.

A turn that closes leaves its session's state (``core/finality.py``): the step that closed
it emits it, and the store keeps it here (``hold``) until ``worker/final_records.py`` has its
final record on the broker and drops it (``take``). Its entries stay the session's, in the
session's epoch, written as they were: the state's journal is told nothing when it closes,
and told of their drop when it is taken (``state/written.py``). The session's head names
each closed turn by its entry (``closed``: [n, reason, final_after], ``state/entries.py``);
a read of the session brings its closed turns back here (``read``). A worker that stops
between the checkpoint that holds a closing and the final record finds the turn again in
the tables, and writes the same record.

Held only for the sessions the store has decoded, and let go with them (``let_go``): a
record costs what its own session holds, never what the store holds. Each checkpoint also
notes which closed turns its sessions held when sealed (``closed_in``), which the Finalizer
writes once the checkpoint is on the changelogs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from stream_app.core.session import Closed, EmittedTurn
from stream_app.state.parts import Part, SealedSession
from stream_app.state.written import Written

_NONE: Mapping[str, EmittedTurn] = MappingProxyType({})


def closings(closed: Mapping[str, EmittedTurn]) -> list[Closed]:
    """The (reason, final_after) of each closed turn: what a session's next instant weighs
    of them (``core/finality.next_at``)."""
    return [turn.closed for turn in closed.values() if turn.closed is not None]


class ClosedTurns(Part):
    def __init__(self) -> None:
        # Session -> its closed turns by inference_call_id, in the order they closed.
        self._held: dict[str, dict[str, EmittedTurn]] = {}
        self._closed: dict[int, dict[str, list[str]]] = {}  # by snapshot number

    def of(self, session_id: str) -> Mapping[str, EmittedTurn]:
        """The session's closed turns still to be written, in the order they closed."""
        return self._held.get(session_id, _NONE)

    def hold(self, session_id: str, turns: Iterable[EmittedTurn]) -> None:
        """Keeps turns the core closed (``Outputs.closed``) until their final records."""
        for turn in turns:
            self._held.setdefault(session_id, {})[turn.call_id] = turn

    def take(self, session_id: str, key: str, journal: Written | None) -> EmittedTurn | None:
        """Drops a closed turn, its final record written: its entries and its decisions'
        are dropped (``journal``, the session's record, is told; None: one written whole)."""
        held = self._held.get(session_id)
        turn = None if held is None else held.pop(key, None)
        if turn is None:
            return None
        if not held:
            del self._held[session_id]
        if journal is not None:
            journal.dropped(turn.entry, turn)
            for d in turn.decisions:
                journal.dropped(d.entry, d)
        return turn

    def read(self, session_id: str, turns: dict[str, EmittedTurn]) -> None:
        """The closed turns a read of the session found (its head's ``closed`` marks)."""
        if turns:
            self._held[session_id] = turns
        else:
            self._held.pop(session_id, None)

    # -- a part of the store ---------------------------------------------------------

    def seal_session(self, sealed: SealedSession) -> None:
        if sealed.state is not None and sealed.closed:
            self._closed.setdefault(sealed.number, {})[sealed.session_id] = list(sealed.closed)

    def released(self, number: int) -> None:
        self._closed.pop(number, None)

    def closed_in(self, number: int) -> dict[str, list[str]]:
        """The closed turns of the checkpoint's sessions, by session, in the order they
        closed."""
        return self._closed.get(number, {})

    def let_go(self, session_id: str) -> None:
        """Read again with the session when next needed (``TableSessions.get``)."""
        self._held.pop(session_id, None)

"""What a store wrote of a session: its bookkeeping, a record of its own beside the state.

The core's ``SessionState`` holds the domain only; what a store needs to write it at the
next checkpoint (``state/entries.py``, E1) is kept here, one record a session the store
holds decoded, and handed to the state as its ``journal`` (``core/session.Journal``): the
generation last written, ``next_entry`` as it was then, the instant of the session's key in
the due index (``state/due.py``), and the entries made and dropped since.

Why a journal the state tells, and not a diff of what was written against the state: a diff
walks every entry of the session at each checkpoint, so a record's cost would grow with its
session. Told of each entry as it is made or dropped, the store does work in proportion to
what the record changed. A state no store has told its changes to yet (new, or one the
store did not read) is written whole the first time it is stored: it holds what its first
records made, no more (``whole``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from stream_app.core.session import EmittedTurn, Entry, SessionState


@dataclass(slots=True)
class Written:
    """One session's bookkeeping in a store: a ``core/session.Journal``."""

    epoch: int = 0  # the epoch of its entries (E3)
    generation: int = 0  # of the head last written (E1)
    next_entry: int = 0  # the state's ``next_entry`` then: entries from there on are new
    due: float | None = None  # the instant of its key in the due index, as its head names
    # Entries made, and entries dropped that were made before, since the last ``take``: an
    # entry made and dropped in between is in neither. Keyed by entry number.
    new: dict[int, Entry] = field(default_factory=dict)
    gone: dict[int, Entry] = field(default_factory=dict)

    def made(self, n: int, entry: Entry) -> None:
        self.new[n] = entry

    def dropped(self, n: int, entry: Entry) -> None:
        if self.new.pop(n, None) is None:
            self.gone[n] = entry

    def take(self) -> tuple[dict[int, Entry], dict[int, Entry]]:
        """The entries made and dropped since the last call (a checkpoint writes them)."""
        made, dropped = self.new, self.gone
        self.new, self.gone = {}, {}
        return made, dropped

    @staticmethod
    def whole(state: SessionState, epoch: int = 0, closed: Iterable[EmittedTurn] = ()) -> Written:
        """The record of a state never written: every entry it holds is new, and those of
        its ``closed`` turns still to be written (``state/closed.py``)."""
        new: dict[int, Entry] = {entry.entry: entry for entry in state.entries()}
        for turn in closed:
            new[turn.entry] = turn
            new.update((d.entry, d) for d in turn.decisions)
        return Written(epoch, new=dict(sorted(new.items())) if closed else new)

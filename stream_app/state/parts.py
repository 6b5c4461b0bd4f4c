"""A record a store keeps beside its sessions and writes with them: a part composed into
``TableSessions`` (``state/sessions.py``), told of each step of a checkpoint.

Composed, not subclassed: the session tables know no index. The due index
(``state/due.DueIndex``), the closed turns each checkpoint holds (``state/closed.py``) and
the final keys (``state/final_keys.py``) are each a part with a record of its own, read and
tested alone; the store calls them in the order it was given them, around its own writes
(E1, ``state/entries.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from stream_app.core.session import EmittedTurn, SessionState
from stream_app.state.written import Written


@dataclass(frozen=True, slots=True)
class SealedSession:
    """A session as a checkpoint seals it, before its head is made: ``state`` None when
    deleted; ``written`` what its head will say (a part may set ``due``); ``closed`` its
    closed turns still to be written (``state/closed.py``), which its head names."""

    number: int  # the checkpoint's (``Snapshot.number``)
    session_id: str
    state: SessionState | None
    written: Written | None
    closed: Mapping[str, EmittedTurn]


class Part:
    """What a part is told; each step does nothing unless the part says otherwise. A
    checkpoint is named by its snapshot's number (``Snapshot.number``)."""

    def sealing(self, number: int) -> None:
        """A checkpoint's seal begins."""

    def seal_session(self, sealed: SealedSession) -> None:
        """A session is sealed into the checkpoint, before its head is made."""

    async def write_before(self, number: int) -> None:
        """What the checkpoint's heads rely on, acknowledged before they are written."""

    async def write_after(self, number: int) -> None:
        """What goes once the heads are written."""

    def written(self, number: int) -> None:
        """The checkpoint's changelog records are acknowledged."""

    def released(self, number: int) -> None:
        """The checkpoint is let go."""

    def forget_all(self) -> None:
        """Partitions moved: what was found of them may be another worker's now."""

    def let_go(self, session_id: str) -> None:
        """The session's decoded state is let go from memory (it is read again when next
        needed)."""

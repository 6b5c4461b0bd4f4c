"""The closed turns each checkpoint holds, by session, for ``worker/final_records.py``,
which writes their final records once the checkpoint is on the changelogs: a part of the
store (``state/parts.py``), beside the due index rather than inside it."""

from __future__ import annotations

from stream_app.core.session import SessionState
from stream_app.state.parts import Part
from stream_app.state.written import Written


class ClosedTurns(Part):
    def __init__(self) -> None:
        self._closed: dict[int, dict[str, list[str]]] = {}  # by snapshot number

    def seal_session(
        self, number: int, session_id: str, state: SessionState | None, written: Written | None
    ) -> None:
        if state is not None and state.closed:
            self._closed.setdefault(number, {})[session_id] = list(state.closed)

    def released(self, number: int) -> None:
        self._closed.pop(number, None)

    def closed_in(self, number: int) -> dict[str, list[str]]:
        """The closed turns of the checkpoint's sessions, by session, in the order they
        closed."""
        return self._closed.get(number, {})

"""The core driven against a store and a clock: what replay, the worker and the tests share.

Turns that close (``core/finality.py``) leave their session's state, emitted in
``Outputs.closed``, which the pipeline takes out. They are written at once when
``finals_now`` (replay, the tests: their final records in ``Outputs.finals``, the turns
dropped); the worker's store keeps them (``state/closed.py``) until the checkpoint that holds
their closing is written (``worker/final_records.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import MappingProxyType

from stream_app.core import finality
from stream_app.core.assembler import apply
from stream_app.core.collapse import Firsts
from stream_app.core.counts import Count
from stream_app.core.expiry import expire
from stream_app.core.intake import decode
from stream_app.core.policy import Policy
from stream_app.core.records import (
    Outputs,
    SessionDecision,
    SessionInput,
    SessionMessage,
    SourceRecord,
)
from stream_app.core.session import EmittedTurn, SessionState
from stream_app.models.json_types import Json
from stream_app.state.base import SessionStore

_NO_FIRSTS: Firsts = MappingProxyType({})


class Pipeline:
    def __init__(
        self,
        policy: Policy,
        store: SessionStore,
        clock: Callable[[], float] = time.time,
        finals_now: bool = True,
    ) -> None:
        self.policy = policy
        self.store = store
        self.clock = clock
        self.finals_now = finals_now
        self.timing = finality.Timing(policy)  # the sessions' next instants, for the store
        # Turns the last tick left waiting for their final record: closed in the sessions it
        # read, and one for each session reached that its limit left (``reached_left``).
        self.waiting = 0
        self.more_reached = False  # whether the last tick's limit left sessions reached

    def decode(
        self, record: SourceRecord, parsed: Json | None = None
    ) -> tuple[SessionInput | None, Outputs]:
        """The stateless half: runs before records are re-keyed by session (``parsed``: its
        value as parsed already, ``core/intake.decode``)."""
        return decode(record, self.policy, self.clock(), parsed)

    def apply(self, item: SessionInput, out: Outputs | None = None) -> Outputs:
        """The stateful half: runs on the worker that owns the item's session. ``out``: the
        outputs its decode began, which this half goes on filling (new when None).

        The store is read before the core's step and written after it, never from inside
        it: the session, the collapse's first copies and whether a finishing message's turn
        went final in; the new session and the collapse's writes out."""
        now = self.clock()
        session_id, collapse = item.session_id, self.store.collapse
        state = self.store.get(session_id)
        firsts = (
            {key: collapse.first(session_id, key) for key in item.collapse_keys}
            if isinstance(item, SessionDecision)
            else _NO_FIRSTS  # a message has no collapse keys
        )
        already_final = (
            isinstance(item, SessionMessage)
            and item.inference_call_id is not None
            and self.store.final_keys.went_final(session_id, item.inference_call_id)
        )
        held = self.store.closed_of(session_id)
        before = 0 if out is None else len(out.closed)
        state, out, writes = apply(state, item, self.policy, now, firsts, out, already_final, held)
        if writes.forget:
            collapse.forget(session_id)
        for key, first in writes.remember:
            collapse.remember(session_id, key, first)
        if len(out.closed) == before and not held:  # most records: nothing closed
            self.store.put(state)
        else:
            self._keep(state, self._closed(out, before), now, out)
        return out

    @staticmethod
    def _closed(out: Outputs, before: int) -> list[EmittedTurn]:
        """The turns closed since ``out.closed`` held ``before``, taken out of ``out``: the
        store keeps them, not the outputs (which are held until the broker has them)."""
        if len(out.closed) == before:
            return []
        closed = [turn for _, turn in out.closed[before:]]
        del out.closed[before:]
        return closed

    def _keep(
        self, state: SessionState, closed: list[EmittedTurn], now: float, out: Outputs
    ) -> None:
        """Puts the state and the turns it closed in the store; with ``finals_now``, the
        final records of every closed turn held are rendered first (before ``put`` lets go
        of a new turn's messages' JSON) and the turns dropped, their keys remembered as
        final."""
        session_id = state.session_id
        if not self.finals_now:
            self.store.put(state, closed)
            return
        held = self.store.closed_of(session_id)
        turns = [*held.values(), *closed] if held else closed
        finals = [finality.final_of(session_id, turn) for turn in turns]
        self.store.put(state, closed)
        for final in finals:
            self.store.sent(session_id, final.inference_call_id)
            self.store.final_keys.remember(session_id, final.inference_call_id, now)
        out.finals.extend(finals)

    def process(self, record: SourceRecord, parsed: Json | None = None) -> Outputs:
        """Both halves, on one ``Outputs``: what decoding counted is never merged in after."""
        item, out = self.decode(record, parsed)
        return out if item is None else self.apply(item, out)

    def tick(self, partition: int | None = None, limit: int | None = None) -> Outputs:
        """The one timer: the sessions whose next instant has come (``finality.next_at``), of
        one partition (None: all), the first ``limit`` (``more_reached`` says whether that
        left some): their turns past the window close, those idle past their time expire,
        and closed turns still to be written are brought into the next checkpoint (found in
        the index after a restart). Costs in proportion to the sessions reached, not to those
        held (``state/due.py``)."""
        out = Outputs()
        now = self.clock()
        waiting = 0
        reached = self.store.reached(partition, now, self.timing, limit)
        self.more_reached = self.store.reached_left > 0
        for session_id, key in reached:
            state = self.store.get(session_id)
            if state is not None:
                state = self._expire(state, now, out)
                waiting += 0 if state is None else len(self.store.closed_of(session_id))
            self.store.read_reached(key, state, now)
        self.waiting = waiting + self.store.reached_left  # each of those may hold a turn
        if forgotten := self.store.final_keys.forget_old(partition, now, self.policy):
            out.counts[Count.FINAL_KEYS_FORGOTTEN] += forgotten
        return out

    def _expire(self, state: SessionState, now: float, out: Outputs) -> SessionState | None:
        """``expire`` against the store: the session as it is left (None: deleted)."""
        session_id = state.session_id
        store = self.store
        kept, expired = expire(state, self.policy, now, bool(store.closed_of(session_id)))
        closed = self._closed(expired, 0)
        out.extend(expired)
        if expired.counts[Count.SESSIONS_EXPIRED]:
            store.collapse.forget(session_id)
        if kept is None:
            store.delete(session_id)
            return None
        if expired.counts or closed or store.closed_of(session_id):
            self._keep(kept, closed, now, out)
        if finality.started_again(kept) and not store.closed_of(session_id):
            store.delete(session_id)  # expired, its closed turns written: nothing is left
            return None
        return kept

    def finish(self) -> Outputs:
        """Closes every open turn of every session held (``expired``): the end of a closed
        input (replay's), where nothing can revise a turn any more. Its final records, in
        each session's order; the sessions are left as they are otherwise."""
        out = Outputs()
        for session_id in self.store.session_ids():
            state = self.store.get(session_id)
            if state is None:
                continue
            closed = Outputs()
            finality.close_all(state, finality.EXPIRED, self.policy, closed)
            self._keep(state, self._closed(closed, 0), self.clock(), out)
        return out

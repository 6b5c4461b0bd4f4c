"""The core driven against a store and a clock: what replay, the worker and the tests share.

Turns that close (``core/finality.py``) are written at once when ``finals_now`` (replay,
the tests: their final records in ``Outputs.finals``, the turns dropped); the worker keeps
them in the state until the checkpoint that holds their closing is written
(``worker/final_records.py``).
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
    FinalTurn,
    Outputs,
    SessionDecision,
    SessionInput,
    SessionMessage,
    SourceRecord,
)
from stream_app.core.session import SessionState
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
        state, out, writes = apply(state, item, self.policy, now, firsts, out, already_final)
        if writes.forget:
            collapse.forget(session_id)
        for key, first in writes.remember:
            collapse.remember(session_id, key, first)
        if self.finals_now and state.closed:
            out.finals.extend(self._drain(state, now))
        self.store.put(state)
        return out

    def _drain(self, state: SessionState, now: float) -> list[FinalTurn]:
        """The closed turns' final records, their keys remembered as final."""
        finals = finality.drain(state)
        for final in finals:
            self.store.final_keys.remember(state.session_id, final.inference_call_id, now)
        return finals

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
                waiting += 0 if state is None else len(state.closed)
            self.store.read_reached(key, state, now)
        self.waiting = waiting + self.store.reached_left  # each of those may hold a turn
        if forgotten := self.store.final_keys.forget_old(partition, now, self.policy):
            out.counts[Count.FINAL_KEYS_FORGOTTEN] += forgotten
        return out

    def _expire(self, state: SessionState, now: float, out: Outputs) -> SessionState | None:
        """``expire`` against the store: the session as it is left (None: deleted)."""
        session_id = state.session_id
        kept, expired = expire(state, self.policy, now)
        out.extend(expired)
        if expired.counts[Count.SESSIONS_EXPIRED]:
            self.store.collapse.forget(session_id)
        if kept is None:
            self.store.delete(session_id)
            return None
        if self.finals_now and kept.closed:
            out.finals.extend(self._drain(kept, now))
        if finality.spent(kept):
            self.store.delete(session_id)
            return None
        if expired.counts or kept.closed:
            self.store.put(kept)
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
            finality.close_all(state, finality.EXPIRED, self.policy)
            if self.finals_now:
                out.finals.extend(self._drain(state, self.clock()))
            self.store.put(state)
        return out

"""The core driven against a store and a clock: what replay, the worker and the tests share."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from types import MappingProxyType

from stream_app.core.assembler import apply
from stream_app.core.collapse import Firsts
from stream_app.core.counts import Count
from stream_app.core.expiry import expire
from stream_app.core.intake import decode
from stream_app.core.policy import Policy
from stream_app.core.records import Outputs, SessionDecision, SessionInput, SourceRecord
from stream_app.models.json_types import Json
from stream_app.state.base import SessionStore

_NO_FIRSTS: Firsts = MappingProxyType({})


class Pipeline:
    def __init__(
        self, policy: Policy, store: SessionStore, clock: Callable[[], float] = time.time
    ) -> None:
        self.policy = policy
        self.store = store
        self.clock = clock

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
        it: the session and the collapse's first copies in, the new session and the
        collapse's writes out."""
        now = self.clock()
        session_id, collapse = item.session_id, self.store.collapse
        state = self.store.get(session_id)
        firsts = (
            {key: collapse.first(session_id, key) for key in item.collapse_keys}
            if isinstance(item, SessionDecision)
            else _NO_FIRSTS  # a message has no collapse keys
        )
        state, out, writes = apply(state, item, self.policy, now, firsts, out)
        if writes.forget:
            collapse.forget(session_id)
        for key, first in writes.remember:
            collapse.remember(session_id, key, first)
        self.store.put(state)
        return out

    def process(self, record: SourceRecord, parsed: Json | None = None) -> Outputs:
        """Both halves, on one ``Outputs``: what decoding counted is never merged in after."""
        item, out = self.decode(record, parsed)
        return out if item is None else self.apply(item, out)

    def sweep(self, session_ids: Iterable[str] | None = None) -> Outputs:
        """Expire idle sessions and closed turns among ``session_ids`` (default: all the
        sessions this store holds); a worker sweeps one partition at a time."""
        out = Outputs()
        now = self.clock()
        for session_id in self.store.session_ids() if session_ids is None else session_ids:
            at = self.store.due_at(session_id, self.policy)
            if at is None or now <= at:
                continue
            state = self.store.get(session_id)
            if state is None:
                continue
            kept, expired = expire(state, self.policy, now)
            out.extend(expired)
            if kept is None:
                self.store.delete(session_id)
                self.store.collapse.forget(session_id)
            elif expired.counts[Count.TURNS_CLOSED]:
                self.store.put(kept)
        return out

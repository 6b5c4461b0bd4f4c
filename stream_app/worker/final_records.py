"""The worker's final records (SPEC §8): written once the closing they follow is durable.

A turn closes in the core (``core/finality.py``) when a tick or a record of its session
finds its window passed, when a session limit closes it early, or when its session
expires; it leaves its session's state, and the store keeps it, closed (``state/closed.py``),
its entries and the head's mark written with the session. At a checkpoint, once the
sessions are written (``checkpointing/batches.py``), ``Finalizer.after_write`` renders the
final record of every closed turn the snapshot holds, hands them to the producer, waits
until the broker has them all, and only then has the store drop those turns and remembers
their keys as final (changes the next checkpoint writes, the keys before the heads:
``state/final_keys.py``). So:

- a worker that stops before a checkpoint holds a closing has written no final record of
  it, and the records it reads again decide the closing afresh;
- a worker that stops after finds the closed turn in its store (the due index names its
  session, ``state/due.py``: the next tick brings it into a checkpoint) and writes the same
  record again: the only repeat there is, and an identical one.

The final topic's record: the turn topic's key, the latest revision's value byte for byte,
to the partition of its session, with the headers ``session_id``, ``revision``,
``final_after`` and ``final_reason``. A session's turns close oldest first, so they reach
the topic in the order they were first emitted.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable

from stream_app.core import finality
from stream_app.core.finality import WINDOW
from stream_app.core.records import FinalTurn
from stream_app.observability import metrics
from stream_app.runtime.slices import Slices
from stream_app.state.sessions import Snapshot, TableSessions

Send = Callable[[list[FinalTurn]], Awaitable[None]]  # returns once the broker has them all


class Finalizer:
    def __init__(
        self, store: TableSessions, send: Send, clock: Callable[[], float] = time.time
    ) -> None:
        self.store = store
        self.send = send
        self.clock = clock
        self.written = 0  # final records acknowledged since the start

    async def after_write(self, snapshot: Snapshot) -> None:
        """Writes the final records of the closed turns ``snapshot`` holds, now that it is
        on the changelogs, then has the store drop them."""
        closed = self.store.closed.closed_in(snapshot.number)
        if not closed:
            return
        finals: list[FinalTurn] = []
        pause = Slices()  # a checkpoint's thousands of turns, rendered and dropped in slices
        store = self.store
        for session_id, keys in closed.items():
            await pause()
            # A session with closed turns is never deleted, and they change only here; a
            # state that no longer reads (``TableSessions._read``) has nothing to write.
            if store.get(session_id) is not None:  # read: its closed turns with it
                held = store.closed_of(session_id)
                finals += [finality.final_of(session_id, held[k]) for k in keys if k in held]
        await self.send(finals)
        self._observe(finals)
        now = self.clock()
        for session_id, keys in closed.items():
            await pause()
            state = store.get(session_id)  # read again: the loop was given back
            if state is None:
                continue
            for key in keys:
                if store.sent(session_id, key) is not None:
                    store.final_keys.remember(session_id, key, now)
            if finality.started_again(state) and not store.closed_of(session_id):
                store.delete(session_id)  # expired, its closed turns written
            else:
                store.put(state)

    def _observe(self, finals: list[FinalTurn]) -> None:
        now = self.clock()
        reasons = Counter(final.reason for final in finals)
        for reason, n in reasons.items():
            metrics.FINALS.labels(reason=reason).inc(n)
        for final in finals:
            if final.reason == WINDOW:  # the others go final before their final_after
                metrics.FINAL_DELAY.observe(max(0.0, now - final.final_after))
        self.written += len(finals)

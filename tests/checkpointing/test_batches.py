"""Batches on their way to a checkpoint (``checkpointing/batches.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from stream_app.checkpointing.batches import Batch, Checkpoints
from stream_app.core.records import Outputs


def test_a_sent_batch_keeps_its_events_and_lets_go_of_what_it_sent() -> None:
    # Until its checkpoint a batch is needed only for its events: the turns and re-keyed
    # records it held, a second's worth of them, were most of a busy worker's memory.
    sent: list[Batch] = []
    observed: list[int] = []

    async def send(batch: Batch) -> list[Awaitable[Any]]:
        sent.append(batch)
        return []

    async def crash(exc: BaseException) -> None:
        raise AssertionError(f"crashed: {exc!r}")

    async def main() -> None:
        checkpoints = Checkpoints(
            store=None,  # type: ignore[arg-type]  # no checkpoint is taken here
            tables=[],
            consumer=None,  # type: ignore[arg-type]
            send=send,
            observe=lambda batch: observed.append(len(batch.emitted)),
            crash=crash,
            interval=3600,
        )
        batch = checkpoints.add(object())  # type: ignore[arg-type]
        batch.emitted.append((Outputs(), None))
        batch.forward.append((b"k", b"v", 0, 0.0))
        await checkpoints.added(full=100)  # nothing in flight: sealed and sent at once
        await asyncio.gather(*checkpoints._in_flight())
        assert sent == [batch] and observed == [1]  # observed before it lets go
        assert len(batch.messages) == 1  # acknowledged at its checkpoint
        assert batch.emitted == [] and batch.forward == []
        assert checkpoints._timer is not None
        checkpoints._timer.cancel()

    asyncio.run(main())

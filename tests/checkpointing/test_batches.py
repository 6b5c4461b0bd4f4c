"""Batches on their way to a checkpoint (``checkpointing/batches.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import pytest

from stream_app.checkpointing.batches import (
    Batch,
    BatchStateError,
    BatchStatus,
    Checkpoints,
    Emitted,
    Forward,
    until_due,
)
from stream_app.checkpointing.consumer import Settlement
from stream_app.core.records import Outputs
from tests.event_loop import beside_another_task, slices_of_nothing


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
            consumer=Consumer(),  # type: ignore[arg-type]
            send=send,
            observe=lambda batch: observed.append(len(batch.emitted)),
            crash=crash,
            interval=3600,
        )
        batch = checkpoints.add(object())  # type: ignore[arg-type]
        batch.emitted.append(Emitted(Outputs(), None))
        batch.forward.append(Forward(b"k", b"v", 0, 0.0))
        await checkpoints.added(full=100)  # nothing in flight: sealed and sent at once
        await asyncio.gather(*checkpoints._in_flight())
        assert sent == [batch] and observed == [1]  # observed before it lets go
        assert len(batch.messages) == 1  # acknowledged at its checkpoint
        assert batch.emitted == [] and batch.forward == []
        assert checkpoints._timer is not None
        checkpoints._timer.cancel()

    asyncio.run(main())


def test_a_sent_batch_lets_go_of_its_outputs_a_slice_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A thousand records' outputs (turn revisions and their bodies) freed in one step held
    # the event loop about 15 ms: they go one at a time, another task running between two.
    import stream_app.runtime.slices as module

    slices_of_nothing(monkeypatch, module)

    async def main() -> None:
        h = Harness()
        batch = h.checkpoints.add("m1")  # type: ignore[arg-type]
        batch.emitted += [Emitted(Outputs(), None) for _ in range(4)]
        await h.checkpoints.added(full=100)
        await h.handed()
        h.acks[0].set_result(None)
        left: list[int] = []
        await beside_another_task(h.sends_done(), lambda: left.append(len(batch.emitted)))
        assert batch.status is BatchStatus.SENT and batch.emitted == []
        changes = [n for i, n in enumerate(left) if not i or n != left[i - 1]]
        assert changes[-5:] == [4, 3, 2, 1, 0]  # the loop given back after each one let go
        h.stop_timer()

    asyncio.run(main())


# -- The lifecycle (``batches.py``'s steps 1-4 and FAILED) -----------------------------


class Consumer:
    """Records what the checkpoints tell the consumer, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []
        self.settlement = Settlement()
        self.commits = 0

    def applied(self, message: object) -> None:
        self.calls.append(("applied", message))

    def ack(self, message: object) -> bool:
        self.calls.append(("ack", message))
        return True

    def ack_applied(self, message: object) -> bool:
        """The two steps in one (``Consumer.ack_applied``), recorded as both."""
        self.applied(message)
        return self.ack(message)

    async def commit(self) -> bool:
        self.commits += 1
        return True


class Store:
    """The sessions' store as a checkpoint uses it: a snapshot sealed, written, settled."""

    def __init__(self, write_error: BaseException | None = None) -> None:
        self.write_error = write_error
        self.sealed = asyncio.Event()  # set when a checkpoint has taken its snapshot
        self.written: list[int] = []
        self.released: list[int] = []
        self.snapshots = 0

    def begin_seal(self) -> int:
        self.snapshots += 1
        self.sealed.set()
        return self.snapshots

    async def finish_seal(self, snapshot: int) -> None:
        pass

    async def write(self, snapshot: int) -> None:
        if self.write_error is not None:
            raise self.write_error
        self.written.append(snapshot)

    def settled(self, snapshot: int) -> None:
        pass

    async def release(self, snapshot: int) -> None:
        self.released.append(snapshot)

    async def evict(self) -> None:
        pass


class Harness:
    """Checkpoints whose sends the test acknowledges (or fails) one batch at a time."""

    def __init__(self, store: Store | None = None) -> None:
        self.consumer = Consumer()
        self.store = store or Store()
        self.acks: list[asyncio.Future[None]] = []  # one per batch handed to the producer
        self.observed: list[Batch] = []
        self.crashes: list[BaseException] = []
        self.checkpoints = Checkpoints(
            store=self.store,  # type: ignore[arg-type]
            tables=[],
            consumer=self.consumer,  # type: ignore[arg-type]
            send=self.send,
            observe=self.observed.append,
            crash=self.crash,
            interval=3600,
        )

    async def send(self, batch: Batch) -> list[Awaitable[Any]]:
        ack = asyncio.get_running_loop().create_future()
        self.acks.append(ack)
        return [ack]

    async def crash(self, exc: BaseException) -> None:
        self.crashes.append(exc)

    async def sealed_batch(self, *messages: object) -> Batch:
        """A batch of ``messages``, sealed and handed to the producer (step 3 under way)."""
        for message in messages:
            batch = self.checkpoints.add(message)  # type: ignore[arg-type]
        await self.checkpoints.added(full=len(messages))
        assert batch.status is BatchStatus.SEALED
        await self.handed()
        return batch

    async def handed(self) -> None:
        """Until the last sealed batch has been handed to the producer."""
        assert self.checkpoints._handed is not None
        await self.checkpoints._handed

    async def sends_done(self) -> None:
        """Until every send under way has ended, however it ended."""
        await asyncio.gather(*self.checkpoints._sending, return_exceptions=True)

    def stop_timer(self) -> None:
        if self.checkpoints._timer is not None:
            self.checkpoints._timer.cancel()


def test_a_batch_takes_its_steps_in_order_or_fails_before_the_last() -> None:
    # The guard is what makes a failed send unable to reach step 4b: a batch acknowledged
    # to Faust must have been SENT.
    allowed = {
        (BatchStatus.OPEN, BatchStatus.SEALED),
        (BatchStatus.SEALED, BatchStatus.SENT),
        (BatchStatus.SENT, BatchStatus.CHECKPOINTED),
        (BatchStatus.OPEN, BatchStatus.FAILED),
        (BatchStatus.SEALED, BatchStatus.FAILED),
        (BatchStatus.SENT, BatchStatus.FAILED),
    }
    for start in BatchStatus:
        for to in BatchStatus:
            batch = Batch(status=start)
            if (start, to) in allowed:
                batch.advance(to)
                assert batch.status is to
            else:
                with pytest.raises(BatchStateError):
                    batch.advance(to)
                assert batch.status is start


def test_batches_are_sent_and_checkpointed_in_the_order_they_were_sealed() -> None:
    async def main() -> None:
        h = Harness()
        first = await h.sealed_batch("m1", "m2")
        second = await h.sealed_batch("m3")
        third = await h.sealed_batch("m4", "m5")
        for ack in reversed(h.acks):  # the broker answers the last batch first
            ack.set_result(None)
        await h.sends_done()
        assert h.observed == [first, second, third]  # SENT in order all the same
        assert [b.status for b in (first, second, third)] == [BatchStatus.SENT] * 3
        await h.checkpoints.checkpoint()
        assert h.store.written == [1]  # one snapshot for the three
        assert h.consumer.calls == [
            (call, message)
            for message in ("m1", "m2", "m3", "m4", "m5")
            for call in ("applied", "ack")
        ]
        assert [b.status for b in (first, second, third)] == [BatchStatus.CHECKPOINTED] * 3
        h.stop_timer()

    asyncio.run(main())


def test_a_batch_sealed_while_a_checkpoint_waits_belongs_to_the_next_checkpoint() -> None:
    # Its records may have changed sessions after the snapshot was taken.
    async def main() -> None:
        h = Harness()
        first = await h.sealed_batch("m1")
        taken = asyncio.create_task(h.checkpoints.checkpoint())
        await h.store.sealed.wait()  # the snapshot is taken; the checkpoint waits for m1
        later = await h.sealed_batch("m2")
        for ack in h.acks:
            ack.set_result(None)
        await taken
        assert h.consumer.calls == [("applied", "m1"), ("ack", "m1")]
        assert first.status is BatchStatus.CHECKPOINTED
        await h.sends_done()
        assert later.status is BatchStatus.SENT
        await h.checkpoints.checkpoint()
        assert h.consumer.calls[2:] == [("applied", "m2"), ("ack", "m2")]
        h.stop_timer()

    asyncio.run(main())


def test_a_failed_send_acknowledges_nothing_even_once_the_agent_has_seen_it_fail() -> None:
    # The agent sees a send fail when it next looks at the batches in flight, which takes
    # the failed send off the list a checkpoint waits on: the checkpoint of the stop then
    # found nothing to wait for, and acknowledged a batch whose turns never reached the
    # broker.
    async def main() -> None:
        h = Harness()
        batch = await h.sealed_batch("m1", "m2")
        refused = OSError("the broker refused the batch")
        h.acks[0].set_exception(refused)
        await h.sends_done()
        with pytest.raises(OSError):
            h.checkpoints._in_flight()  # what the agent's next ``added`` does
        await h.checkpoints.checkpoint()  # the stop's settle
        assert h.consumer.calls == []
        assert h.store.written == []
        assert h.crashes == [refused]
        assert batch.status is BatchStatus.FAILED
        assert h.observed == []
        h.stop_timer()

    asyncio.run(main())


def test_a_failed_send_fails_the_batches_after_it_and_stops_the_worker_once() -> None:
    async def main() -> None:
        h = Harness()
        first = await h.sealed_batch("m1")
        second = await h.sealed_batch("m2")  # sent after the first, whatever the broker says
        refused = OSError("the broker refused the batch")
        h.acks[1].set_result(None)
        h.acks[0].set_exception(refused)
        await h.sends_done()
        await h.checkpoints.checkpoint()  # the stop's settle: nothing, and no second error
        assert h.consumer.calls == []
        assert h.crashes == [refused]  # once, by the step that failed
        assert first.status is second.status is BatchStatus.FAILED
        h.stop_timer()

    asyncio.run(main())


def test_records_of_a_failed_agent_are_never_checkpointed() -> None:
    # Issue 20 item 1: a record whose processing raises stops the agent; the stop then
    # settled the open batch, and the committed offset passed the failing record and the
    # valid records fetched after it. Nothing after the last checkpoint may be
    # acknowledged: the snapshot of the next one would hold the failing record's partial
    # changes.
    async def main() -> None:
        h = Harness()
        sent = await h.sealed_batch("m1")
        h.acks[0].set_result(None)
        await h.sends_done()
        assert sent.status is BatchStatus.SENT
        open_batch = h.checkpoints.add("m2")  # type: ignore[arg-type]  # applied
        h.checkpoints.add("m3")  # type: ignore[arg-type]  # its processing raises
        h.checkpoints.fail(ValueError("apply raised"))
        await h.checkpoints.checkpoint()  # the stop's settle (``Consumer.wait_empty``)
        assert h.consumer.calls == []
        assert h.store.written == []
        assert sent.status is open_batch.status is BatchStatus.FAILED
        assert isinstance(h.checkpoints.failure, ValueError)
        assert h.crashes == []  # the agent's own failure stops the worker
        with pytest.raises(BatchStateError):
            h.checkpoints.add("m4")  # type: ignore[arg-type]
        h.stop_timer()

    asyncio.run(main())


def test_a_failure_while_a_checkpoint_waits_for_its_batches_acknowledges_nothing() -> None:
    async def main() -> None:
        h = Harness()
        batch = await h.sealed_batch("m1")
        taken = asyncio.create_task(h.checkpoints.checkpoint())
        await h.store.sealed.wait()  # waiting for m1's send
        h.checkpoints.fail(ValueError("apply raised"))
        h.acks[0].set_result(None)
        await taken
        assert h.consumer.calls == []
        assert h.store.written == []
        assert batch.status is BatchStatus.FAILED
        assert h.observed == []  # sent again, and counted, by the worker that reads it again
        h.stop_timer()

    asyncio.run(main())


def test_a_failed_write_fails_every_batch_not_yet_checkpointed() -> None:
    async def main() -> None:
        refused = OSError("a changelog record was refused")
        h = Harness(Store(write_error=refused))
        batch = await h.sealed_batch("m1")
        h.acks[0].set_result(None)
        await h.sends_done()
        later = h.checkpoints.add("m2")  # type: ignore[arg-type]
        taken = asyncio.create_task(h.checkpoints.checkpoint())  # seals m2 too
        await h.store.sealed.wait()
        h.acks[1].set_result(None)
        with pytest.raises(OSError):
            await taken
        h.store.write_error = None
        await h.checkpoints.checkpoint()  # nothing after a failure, not even a retry
        assert h.consumer.calls == []
        assert h.store.written == []
        assert batch.status is later.status is BatchStatus.FAILED
        assert h.crashes == [refused]
        h.stop_timer()

    asyncio.run(main())


# -- R10's hand-over (``consumer.Settlement``) -----------------------------------------


def test_the_consumers_ask_is_answered_by_a_checkpoint_of_everything_applied() -> None:
    # Before a rebalance or a stop the consumer asks; the answer must come only once the
    # events applied before the ask are acknowledged, else Faust's wait ends with them
    # unacknowledged and the rebalance re-reads them (a stop: drops them uncommitted).
    async def main() -> None:
        h = Harness()  # an hour between checkpoints: only the ask makes this one
        await h.sealed_batch("m1", "m2")
        h.acks[0].set_result(None)
        h.checkpoints.add("m3")  # type: ignore[arg-type]  # applied, still in the open batch
        asked = asyncio.create_task(h.consumer.settlement.ask())
        await asyncio.wait_for(h.store.sealed.wait(), timeout=10)  # the checkpoint began
        await h.handed()  # m3's batch, sealed by the checkpoint
        assert not asked.done() and h.consumer.calls == []
        h.acks[1].set_result(None)
        await asyncio.wait_for(asked, timeout=10)
        assert [message for call, message in h.consumer.calls if call == "ack"] == [
            "m1",
            "m2",
            "m3",
        ]
        assert h.store.written == [1]
        h.stop_timer()

    asyncio.run(main())


def test_an_ask_with_nobody_to_answer_returns_and_one_waiting_is_released_at_the_end() -> None:
    async def main() -> None:
        settlement = Settlement()
        await asyncio.wait_for(settlement.ask(), timeout=10)  # nothing applied: no party yet
        h = Harness()
        await h.sealed_batch("m1")  # the party answers from here on
        h.checkpoints.fail(ValueError("apply raised"))  # its checkpoints now do nothing
        await asyncio.wait_for(h.consumer.settlement.ask(), timeout=10)  # still answered
        assert h.consumer.calls == []
        h.stop_timer()
        assert h.checkpoints._timer is not None
        await asyncio.gather(h.checkpoints._timer, return_exceptions=True)  # its end closes
        await asyncio.wait_for(h.consumer.settlement.ask(), timeout=10)
        assert not h.consumer.settlement.answering

    asyncio.run(main())


def test_what_a_checkpoint_acknowledged_is_committed_right_after_it() -> None:
    # Faust commits on its own timer: what a checkpoint acknowledged waited up to another
    # interval for it, so a crash re-read it and the group's lag said it was not done.
    async def main() -> None:
        h = Harness()
        await asyncio.wait_for(h.consumer.settlement.ask(), timeout=10)  # no party yet
        assert h.consumer.commits == 0
        await h.sealed_batch("m1")
        h.acks[0].set_result(None)
        await asyncio.wait_for(h.consumer.settlement.ask(), timeout=10)
        assert h.consumer.calls == [("applied", "m1"), ("ack", "m1")]
        await asyncio.wait_for(h.consumer.settlement.ask(), timeout=10)  # nothing new
        assert h.consumer.commits == 1  # the first checkpoint's; the second acknowledged nothing
        h.stop_timer()

    asyncio.run(main())


def test_a_checkpoint_lets_its_snapshot_go_once_acknowledged_and_a_failed_one_does_not() -> None:
    # Kept until the next seal replaced it, a snapshot of 5,000 sessions was freed in one
    # step of that seal: 28-34 ms with the loop held. Each checkpoint now lets its own go,
    # a slice at a time (``TableSessions.release``), once nothing needs it.
    async def main() -> None:
        h = Harness()
        await h.sealed_batch("m1")
        h.acks[0].set_result(None)
        batch = h.checkpoints._sealed[0]
        assert await h.checkpoints.checkpoint() == 1
        assert h.store.released == h.store.written == [1]
        assert batch.messages == []  # its events too, batch by batch, not all at the end
        h.stop_timer()

        failing = Harness(Store(write_error=RuntimeError("the broker refused a record")))
        await failing.sealed_batch("m1")
        failing.acks[0].set_result(None)
        with pytest.raises(RuntimeError):
            await failing.checkpoints.checkpoint()
        assert failing.store.released == []
        failing.stop_timer()

    asyncio.run(main())


def test_checkpoints_are_due_an_interval_after_the_last_began() -> None:
    # Timed from the end of the last one, checkpoints longer than the interval left the
    # loop idle a whole interval between two of them while records waited.
    assert until_due(began=10.0, now=10.25, interval=1.0) == 0.75
    assert until_due(began=10.0, now=12.5, interval=1.0) == 0.0  # it took longer: at once


def test_step_4b_gives_the_event_loop_back_between_two_acknowledgements(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A batch of thousands of records acknowledged in one step held the loop 18-37 ms.
    # With slices of nothing, another task runs after every acknowledgement; a failure
    # meanwhile stops them, the batch under way FAILED with what it acknowledged durable.
    import stream_app.checkpointing.batches as module

    slices_of_nothing(monkeypatch, module)

    async def main() -> None:
        h = Harness()
        batch = await h.sealed_batch("m1", "m2", "m3", "m4")
        h.acks[0].set_result(None)
        log = h.consumer.calls

        def note() -> None:
            if len([c for c in log if c[0] == "ack"]) < 2:
                log.append(("other task", None))
            else:
                h.checkpoints.fail(RuntimeError("the agent failed"))

        assert await beside_another_task(h.checkpoints.checkpoint(), note) == 2
        acks = [name for name, _ in log if name != "applied"]
        assert acks[acks.index("ack") :] == ["ack", "other task", "ack"]
        assert batch.status is BatchStatus.FAILED
        h.stop_timer()

    asyncio.run(main())

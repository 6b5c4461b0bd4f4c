"""Faust's Kafka consumer with its at-least-once holes closed (SPEC §5).

Faust commits, for each partition, the offset after the longest run of acknowledged events.
Three of its ways of counting that run could commit past an event no agent had applied,
and a worker killed after such a commit loses the event for good:

- a stream acknowledges the events it skips, among them those it takes while a rebalance
  has suspended the flow and those fetched before the rebalance (faust-streaming #216,
  #221), although no agent applied them: here an acknowledgement counts only for an event
  the agent has marked ``applied``, in the consumer generation it was fetched in;
- the run is taken from the first acknowledged offset even when it does not start at the
  committed one: with nothing committed yet any run counted, and an offset missing right
  after the committed one was not seen as a gap (#312): here a run must start at the
  committed offset (or at the start of the log), and only acknowledged offsets extend it;
- a jump in fetched offsets marks the fetched event itself as a gap, i.e. as done before
  it is processed: here a gap ends before the event that revealed it.

The agent acknowledges an event only once its turns, dead letters and state are written, and
Faust flushes the producer before every commit, so a committed offset is one whose effects
are on the broker. The consumer's fetch wait, hard-coded by Faust, is a setting here.
"""

from __future__ import annotations

import bisect
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar
from weakref import WeakSet

from aiokafka import AIOKafkaConsumer
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP, Message


class FetchWaitConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    """Faust's consumer thread, with the fetch wait of the app's settings."""

    fetch_max_wait_ms: ClassVar[int] = 500

    def _create_worker_consumer(self, transport: Any) -> AIOKafkaConsumer:
        consumer = super()._create_worker_consumer(transport)
        # Faust passes 1,500 ms. A broker holds a fetch up to this long when it has nothing
        # new; the test broker holds every fetch for all of it, which is latency per hop.
        consumer._fetch_max_wait_ms = self.fetch_max_wait_ms
        return consumer


class Consumer(faust_aiokafka.Consumer):
    """Commits only runs of processed offsets that start at the committed offset."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._applied: WeakSet[Message] = WeakSet()
        # Set by the app: settles every batch applied so far (``checkpointing/batches.py``).
        self.settle: Callable[[], Awaitable[None]] | None = None

    def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
        return FetchWaitConsumerThread(self, loop=self.loop, beacon=self.beacon)

    def applied(self, message: Message) -> None:
        """Marks an event whose effects are all written: its acknowledgement then counts."""
        self._applied.add(message)

    def ack(self, message: Message) -> bool:
        if message not in self._applied or (
            message.generation_id != self.app.consumer_generation_id
        ):
            # Skipped, or fetched before the latest rebalance: its partition is sought back
            # to the committed offset, so the event comes again and is applied then.
            self._unacked_messages.discard(message)
            return False
        self._applied.discard(message)
        return bool(super().ack(message))

    async def wait_empty(self) -> None:
        """Before a rebalance or a stop: every applied event settled, then Faust's wait."""
        if self.settle is not None:
            await self.settle()
        await super().wait_empty()

    async def perform_seek(self) -> None:
        """After seeking to the committed offsets, know where uncommitted partitions start."""
        await super().perform_seek()
        unknown = [tp for tp in self.assignment() if self._committed_offset.get(tp) is None]
        if unknown:
            starts = await self.earliest_offsets(*unknown)
            for tp, start in starts.items():
                if start is not None and start >= 0 and tp not in self._acked:
                    self._committed_offset[tp] = start

    async def _add_gap(self, tp: TP, offset_from: int, offset_to: int) -> None:
        """Offsets ``offset_from`` up to, not including, ``offset_to`` (the fetched event)."""
        committed = self._committed_offset[tp]
        start = offset_from if committed is None else max(offset_from, committed)
        if start < offset_to:
            gaps = self._gap[tp]
            gaps.addi(start, offset_to)
            gaps.merge_overlaps()

    def _new_offset(self, tp: TP) -> int | None:
        committed = self._committed_offset[tp]
        acked = self._acked[tp]
        gaps = self._gap[tp]
        if committed is None or not (acked or gaps):
            return None  # never guess where a partition's processing started
        acked.sort()
        done = self._acked_index[tp]
        position = committed
        while True:
            if position in done:
                position += 1
            elif gaps and (spans := gaps.at(position)):
                position = max(span.end for span in spans)
            else:
                break
        if position == committed:
            return None
        cut = bisect.bisect_left(acked, position)
        done.difference_update(acked[:cut])
        del acked[:cut]
        if gaps:
            gaps.chop(0, position)
        return position


class Transport(faust_aiokafka.Transport):
    Consumer = Consumer

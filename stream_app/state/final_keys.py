"""The turn keys that went final (SPEC §8 "Once"): remembered beyond their session.

A turn's final record is written once. A finishing message for its key read later (a
redelivery after the session forgot the message's identity, or the agent's transcript
published again after the session expired) would make a second turn under the same key, and
a second, different final record that compaction keeps. So the key is remembered when its
final record is written (when the closed turn leaves its session), and a finishing message
for a remembered key is a counted duplicate (``core/assembler.apply``, ``already_final``).

The bound: a key is remembered for at least ``Policy.final_keys_horizon`` (the session TTL
plus the late-decision window) after it went final, and at most ``max_final_keys`` keys per
partition; past that the oldest are forgotten early, counted (``final_keys_forgotten``).
A finishing message for a key forgotten is a new turn again, as it was before.

In the worker the keys are a table, ``final_keys``, each key filed in its session's
partition and written with the sessions at a checkpoint, before the heads that no longer
hold the closed turn (a part of the store, ``state/parts.py``), so no state on the
changelog has dropped a closed turn whose key is not remembered. Two records a key:

- ``[session_id, inference_call_id]`` (JSON) -> the instant it went final (8 bytes, ms):
  the look-up, one point read a finishing message;
- ``\\x00`` + the instant + that JSON -> empty: the order, so that a tick reads only the
  keys past their horizon (one range read, as the due index does: ``state/due.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stream_app.core import jsonbytes
from stream_app.core.policy import Policy
from stream_app.state.due import INSTANT_BYTES, DueTable, due_key
from stream_app.state.parts import Part
from stream_app.state.sessions import session_of

ORDER = b"\x00"  # the first byte of an order record: below any JSON array's "["
_ORDER_END = b"\x01"
# The most keys one tick forgets of a partition: a worker that was down for long catches up
# over several ticks, never holding the loop for one.
FORGET_PER_TICK = 5_000


def lookup_key(session_id: str, call_id: str) -> bytes:
    return jsonbytes.dumps([session_id, call_id])


def order_key(instant: float, lookup: bytes) -> bytes:
    return ORDER + due_key(instant, "") + lookup


def session_of_final_key(key: bytes) -> bytes:
    """The session id of either record, which decides its partition."""
    return session_of(key[1 + INSTANT_BYTES :] if key[:1] == ORDER else key)


@dataclass
class _Batch:
    put: dict[bytes, float] = field(default_factory=dict)  # lookup key -> instant
    delete: list[bytes] = field(default_factory=list)  # order keys forgotten


class TableFinalKeys(Part):
    """The keys over the ``final_keys`` table. What a checkpoint has not written yet is read
    from an overlay, kept by batch, as ``TableCollapse`` keeps its entries. A part of the
    worker's store: a checkpoint seals a batch and writes it around its heads."""

    def __init__(self, table: DueTable, partitions: int) -> None:
        self.table = table
        self.partitions = partitions
        self._batch = 0  # the open batch's number
        self._batches: dict[int, _Batch] = {}
        self._remembered: dict[bytes, int] = {}  # lookup key -> its batch, until written
        self._forgetting: set[bytes] = set()  # order keys forgotten, until written
        self._held: dict[int, int] = {}  # partition -> keys, once counted
        self._sealed_as: dict[int, int] = {}  # snapshot number -> the batch it writes

    def went_final(self, session_id: str, call_id: str) -> bool:
        key = lookup_key(session_id, call_id)
        return key in self._remembered or self.table.get(key) is not None

    def remember(self, session_id: str, call_id: str, now: float) -> None:
        key = lookup_key(session_id, call_id)
        if self.went_final(session_id, call_id):
            return
        self._remembered[key] = self._batch
        self._batches.setdefault(self._batch, _Batch()).put[key] = now
        partition = self.table.partition_for_key(key)
        if partition in self._held:
            self._held[partition] += 1

    def forget_old(self, partition: int | None, now: float, policy: Policy) -> int:
        partitions = range(self.partitions) if partition is None else (partition,)
        early = 0
        for p in partitions:
            self._forget_below(p, order_key(now - policy.final_keys_horizon, b""))
            held = self._count(p, policy.max_final_keys)
            if held > policy.max_final_keys:
                early += self._forget_below(p, _ORDER_END, held - policy.max_final_keys)
        return early

    def held(self) -> int:
        return sum(self._held.values())

    def _forget_below(self, partition: int, high: bytes, most: int = FORGET_PER_TICK) -> int:
        read = most + len(self._forgetting)
        keys = self.table.keys_between(partition, ORDER, high, read)
        gone = [k for k in keys if k not in self._forgetting][:most]
        self._forgetting.update(gone)
        self._batches.setdefault(self._batch, _Batch()).delete.extend(gone)
        if partition in self._held:
            self._held[partition] -= len(gone)
        return len(gone)

    def _count(self, partition: int, limit: int) -> int:
        """The partition's keys, counted once after an assignment (up to one past the limit:
        all the limit needs) and kept up after."""
        if partition not in self._held:
            read = limit + 1 + len(self._forgetting)
            keys = self.table.keys_between(partition, ORDER, _ORDER_END, read)
            self._held[partition] = len([k for k in keys if k not in self._forgetting])
            self._held[partition] += sum(
                1 for k in self._remembered if self.table.partition_for_key(k) == partition
            )
        return self._held[partition]

    # -- a checkpoint's writes (``state/parts.py``) -------------------------------------

    def sealing(self, number: int) -> None:
        self._sealed_as[number] = self.seal()

    async def write_before(self, number: int) -> None:
        if (batch := self._sealed_as.get(number)) is not None:
            await self.write_remembered(batch)

    async def write_after(self, number: int) -> None:
        if (batch := self._sealed_as.get(number)) is not None:
            await self.write_forgotten(batch)

    def written(self, number: int) -> None:
        if (batch := self._sealed_as.get(number)) is not None:
            self.settled(batch)

    def released(self, number: int) -> None:
        self._sealed_as.pop(number, None)

    def forget_all(self) -> None:
        self.forget_counts()

    def seal(self) -> int:
        """Closes the open batch for the checkpoint sealing now; its number."""
        sealed, self._batch = self._batch, self._batch + 1
        return sealed

    async def write_remembered(self, batch: int) -> None:
        """Before the heads: the keys of turns those heads no longer hold, acknowledged."""
        written = self._batches.get(batch)
        if written is None:
            return
        for key, instant in written.put.items():
            await self.table.put(key, due_key(instant, ""))
            await self.table.put(order_key(instant, key), b"")
        await self.table.written()

    async def write_forgotten(self, batch: int) -> None:
        """After the heads: the keys past their horizon or the limit, both records."""
        written = self._batches.get(batch)
        if written is None:
            return
        for order in written.delete:
            await self.table.put(order, None)
            await self.table.put(order[1 + INSTANT_BYTES :], None)

    def settled(self, batch: int) -> None:
        written = self._batches.pop(batch, None)
        if written is None:
            return
        for key in written.put:
            if self._remembered.get(key) == batch:
                del self._remembered[key]
        self._forgetting.difference_update(written.delete)

    def forget_counts(self) -> None:
        """Partitions moved: they are counted again at their next tick."""
        self._held.clear()

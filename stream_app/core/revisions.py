"""The turn topic as a consumer reads it: revision headers, the latest revision of each turn,
and whether a turn is final.

The worker writes every revision of a turn under the turn's key; the topic is compacted, but
a reader may still see several revisions of a key (compaction runs late, or never on the
test broker). Kafka keeps a key's records in order within its partition, so the latest
revision is the last one read there. A turn is its parsed key, (session id, inference call id),
never the key's text: a producer that spells the key otherwise (``["s", "a1"]``, as
``json.dumps`` writes it) still names the turn the worker keys ``["s","a1"]``
(``turn_identity``). The headers (``TurnRevision.headers``) tell a consumer
which revision a record is and when its turn can no longer change, without reading state.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

import orjson

from stream_app.core.records import turn_key
from stream_app.models.timestamps import instant_ns

SESSION_ID = "session_id"
REVISION = "revision"
FINAL_AFTER = "final_after"


@dataclass(frozen=True, slots=True)
class RevisionHeaders:
    session_id: str
    revision: int  # 1 for the first emission of a turn, then 2, 3, ...
    final_after: float  # epoch seconds after which nothing revises the turn


def read_headers(headers: Iterable[tuple[str, bytes]] | None) -> RevisionHeaders | None:
    """The revision headers of a record, or None when any is missing or malformed.

    A record without them was written by a worker from before revision headers, or by
    another producer: a consumer cannot tell whether its turn is final.
    """
    found = dict(headers or ())
    try:
        session_id = found[SESSION_ID].decode()
        revision = int(found[REVISION].decode("ascii"))
        final_after = instant_ns(found[FINAL_AFTER].decode("ascii")) / 1e9
    except (KeyError, UnicodeDecodeError, ValueError):
        return None
    if revision < 1:
        return None
    return RevisionHeaders(session_id, revision, final_after)


def turn_identity(key: bytes) -> bytes:
    """The key a turn is known by: a key that names a turn (the JSON array
    ``[session_id, inference_call_id]``, however spaced or escaped) as the worker writes it
    (``core/records.turn_key``); any other key as it is, which no turn's can equal (the
    worker's spelling of a pair is always a pair)."""
    try:
        pair = orjson.loads(key)
    except orjson.JSONDecodeError:
        return key
    if isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair):
        return turn_key(pair[0], pair[1])
    return key


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """One record of the turn topic, as far as choosing and writing the latest goes."""

    partition: int
    offset: int
    key: bytes
    value: bytes | None  # None: a tombstone, which deletes the key on a compacted topic
    headers: RevisionHeaders | None


def _replaces(new: TurnRecord, old: TurnRecord) -> bool:
    """Whether ``new`` is a later revision of the same key than ``old``.

    In one partition, the later offset is (Kafka's order, what compaction keeps). A key in
    two partitions happens only when the topic's partitions were added to after the turn
    was written: then the higher revision number is the later one, and without headers the
    record read last.
    """
    if new.partition == old.partition:
        return new.offset > old.offset
    if new.headers is not None and old.headers is not None:
        return new.headers.revision >= old.headers.revision
    return True


@dataclass(slots=True)
class Latest:
    """The latest revision of every key, fed the turn topic's records in any partition order
    (each partition in offset order), by the turn each names (``turn_identity``). A record
    kept is kept under that key, whatever its own spelling."""

    # A key keeps the place of its first record (a dict keeps a key where it was first put):
    # within a partition, the order its turns were first emitted in.
    records: dict[bytes, TurnRecord] = field(default_factory=dict)
    read: int = 0

    def add(self, record: TurnRecord) -> None:
        self.read += 1
        key = turn_identity(record.key)
        if key != record.key:
            record = replace(record, key=key)
        old = self.records.get(key)
        if old is None or _replaces(record, old):
            self.records[key] = record

    def select(self, now: float, include_open: bool) -> tuple[list[TurnRecord], Counter[str]]:
        """The latest revisions to write, by partition and in each in the order the turns were
        first emitted (the offset of a key's first record, as on the final topic), and counts.

        A turn is final when its ``final_after`` is before ``now``; one without headers is
        counted open, as nothing says it cannot change. Deleted keys are not written.
        """
        counts: Counter[str] = Counter(records_read=self.read, keys=len(self.records))
        chosen = []
        for record in self.records.values():
            if record.value is None:
                counts["deleted"] += 1
                continue
            if record.headers is None:
                counts["without_headers"] += 1
            final = record.headers is not None and record.headers.final_after < now
            counts["final" if final else "open"] += 1
            if final or include_open:
                chosen.append(record)
        chosen.sort(key=lambda r: r.partition)  # stable: first emissions stay in order
        counts["written"] = len(chosen)
        return chosen, counts

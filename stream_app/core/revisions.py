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

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

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


class Kept(NamedTuple):
    """Which record of a turn key a reader keeps, as far as telling a later one goes."""

    partition: int
    offset: int
    revision: int | None  # from its revision headers; None: it has none


def replaces(new: Kept, old: Kept) -> bool:
    """Whether ``new`` is a later revision of the same key than ``old``.

    In one partition, the later offset is (Kafka's order, what compaction keeps). A key in
    two partitions happens only when the topic's partitions were added to after the turn
    was written: then the higher revision number is the later one, and without headers the
    record read last.
    """
    if new.partition == old.partition:
        return new.offset > old.offset
    if new.revision is not None and old.revision is not None:
        return new.revision >= old.revision
    return True


def is_final(final_after: float | None, now: float) -> bool:
    """Whether nothing revises the turn after ``now``, given its headers' ``final_after``
    (None: a record without headers, which cannot tell, and is counted open)."""
    return final_after is not None and final_after < now

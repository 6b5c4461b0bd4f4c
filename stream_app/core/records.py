"""The values that flow through the core: source records in, session inputs, emissions out.

Everything here is plain data that orjson serializes as it is, so the worker can ship a
decoded input across a repartition topic and store session state in a changelog table.
"""

from __future__ import annotations

import base64
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol

import orjson

from stream_app.core import jsonbytes
from stream_app.core.collapse import decision_key
from stream_app.core.counts import Count, Counts
from stream_app.models.dead_letter import DeadLetterDict, Encoding
from stream_app.models.decision import DecisionDict
from stream_app.models.timestamps import format_utc
from stream_app.models.turn import InferenceMessageDict, TurnDict

if TYPE_CHECKING:
    from stream_app.core.session import EmittedTurn

_new_tuple = tuple.__new__

TopicKind = str  # an input kind's name (``core/inputs.py``)
Outcome = Literal["contributed", "duplicate", "dead_lettered"]


# The values made for every record are named tuples: as immutable as a frozen dataclass,
# and cheaper to make (a frozen dataclass sets each field through ``object.__setattr__``).


class SourceRecord(NamedTuple):
    """One record as read from an input topic (or one line of a replay file)."""

    kind: TopicKind
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    # The record's timestamp (epoch seconds), when it has one: what tells a topic whose
    # offsets started again from a record read again (``core/assembler.apply``).
    timestamp: float | None = None


class Located(Protocol):
    """A record where it was read: a ``SourceRecord``, or Faust's ``Message`` (a record of
    the worker's own, or one that is no input of any kind)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...


class Unread(NamedTuple):
    """A record that is no input of any kind (a replay line that is not a record)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


# An ``Origin`` as state and ``<id>-sessions`` write it: a JSON array of its fields in order.
OriginFields = tuple[str, int, int, str | None, str | None, Encoding]


class Origin(NamedTuple):
    """Where a record came from, with its original bytes as §6 writes them."""

    source_topic: str
    partition: int
    offset: int
    key: str | None
    value: str | None
    encoding: Encoding

    @classmethod
    def of(cls, record: Located, value: bytes | None = None) -> Origin:
        """``value``: bytes to carry instead of the record's own (a redacted copy of a value
        the core parsed, so UTF-8 as the original was: the key decides the encoding)."""
        raw_key, raw_value = record.key, record.value if value is None else value
        try:
            key = None if raw_key is None else raw_key.decode()
            text = None if raw_value is None else raw_value.decode()
            encoding: Encoding = "utf-8"
        except UnicodeDecodeError:
            key = None if raw_key is None else base64.b64encode(raw_key).decode()
            text = None if raw_value is None else base64.b64encode(raw_value).decode()
            encoding = "base64"
        # Made as the tuple it is: a named tuple's own ``__new__`` is a Python call (every
        # record makes an origin).
        fields = (record.topic, record.partition, record.offset, key, text, encoding)
        return _new_tuple(cls, fields)

    def fields(self) -> OriginFields:
        """Its fields in order, as state and ``<id>-sessions`` write an origin (a plain
        tuple: orjson writes no subclass of one)."""
        return (self.source_topic, self.partition, self.offset, self.key, self.value, self.encoding)


Source = tuple[str, int, int]  # (topic, partition, offset) of the record an input came from


class SessionMessage(NamedTuple):
    """A validated chat message, translated to an InferenceMessage, keyed by its session."""

    session_id: str
    identity: str | None
    sequence: int | None
    message: InferenceMessageDict
    # Set when this message completes an inference call (assistant, non-empty finishReason).
    inference_call_id: str | None
    size: int  # bytes of ``message`` as JSON: what the session's pending limit counts
    origin: Origin  # the record, for a dead letter written when the session cannot take it
    timestamp: float | None = None  # the record's (``SourceRecord.timestamp``)
    # ``message`` as JSON, made once at intake for its size and reused by every write of it
    # (the pending entry, the Turn, the turn's body); empty when not made yet.
    json: bytes = b""

    @property
    def source(self) -> Source:
        return (self.origin.source_topic, self.origin.partition, self.origin.offset)


class SessionDecision(NamedTuple):
    """A validated, tenant-bound, redacted decision, keyed by its session."""

    session_id: str
    decision: DecisionDict  # captured_at may still be None
    natural_key: str
    # codex with a call_id: the key shared by a row and its pathless re-send
    codex_sibling: str | None
    origin: Origin
    timestamp: float | None = None  # the record's (``SourceRecord.timestamp``)

    @property
    def source(self) -> Source:
        return (self.origin.source_topic, self.origin.partition, self.origin.offset)

    @property
    def collapse_keys(self) -> list[str]:
        """Every key the collapse may know a copy of it by (``core/collapse.py``)."""
        named = decision_key(self.decision["decision_id"])
        if self.codex_sibling is None:
            return [self.natural_key, named]
        return [self.natural_key, self.codex_sibling, named]


SessionInput = SessionMessage | SessionDecision


def turn_key(session_id: str, inference_call_id: str) -> bytes:
    """The turn topic's record key (SPEC §1): the JSON array ``[session_id,
    inference_call_id]`` as orjson writes it (compact UTF-8, ``schemas/turn-key.v1.json``).

    JSON quotes and escapes each string, so the key tells the pair apart for any two ids
    (NUL, quotes, colons, any Unicode), and one session's turn never replaces another's
    on the compacted topic. orjson writes the same bytes for the same pair every time.
    """
    return jsonbytes.dumps([session_id, inference_call_id])


def turns_line(key: str, value: bytes) -> bytes:
    """One line of a TURNS file (``stream-app replay``'s output, ``stream-app export``'s):
    ``{"key": <key>, "value": <the Turn>}``, the Turn's JSON as it is, not parsed and
    written again."""
    return b"".join((b'{"key":', orjson.dumps(key), b',"value":', value, b"}\n"))


@dataclass(slots=True)
class TurnRevision:
    session_id: str
    turn: TurnDict
    first: bool  # the turn's first emission, not a revision for a late decision
    # 1 for the first emission, then 2, 3, ... per key: counted in the session's state, so
    # a restarted worker and replay number alike (a re-emission after a crash repeats its
    # number). A revision dead-lettered as ``turn_too_large`` leaves its number unused.
    revision: int
    # Epoch seconds after which no record can revise the turn (its emission + the
    # late-decision window): the state drops the turn then (``core/expiry.py``).
    final_after: float
    # ``turn`` as the turn topic's record value (``EmittedTurn.rendered`` makes both).
    value: bytes = field(repr=False)

    @property
    def key_bytes(self) -> bytes:
        """The record key on the turn topic: ``turn_key(session_id, inference_call_id)``."""
        return turn_key(self.session_id, self.turn["inference_call_id"])

    @property
    def key(self) -> str:
        """The same key as text (replay's TURNS lines); ``key.encode() == key_bytes``."""
        return self.key_bytes.decode()

    @property
    def headers(self) -> list[tuple[str, bytes]]:
        """The record headers on the turn topic (``core/revisions.py`` reads them back).

        ``session_id`` (UTF-8), ``revision`` (ASCII decimal) and ``final_after`` (RFC 3339,
        UTC, microseconds): a consumer dedupes and knows when a turn is final without
        parsing the key or the value, or holding any state.
        """
        return [
            ("session_id", self.session_id.encode()),
            ("revision", str(self.revision).encode()),
            ("final_after", format_utc(self.final_after).encode()),
        ]


FinalReason = Literal["window", "expired", "evicted"]


@dataclass(slots=True)
class FinalTurn:
    """A turn that nothing can revise any more, as the final topic carries it (SPEC §8):
    its latest revision's value byte for byte (``EmittedTurn.rendered`` makes both) and
    why it is final (``core/finality.py``)."""

    session_id: str
    inference_call_id: str
    revision: int  # the number of its latest revision
    final_after: float  # as the turn topic's ``final_after`` header said it
    reason: FinalReason
    value: bytes = field(repr=False)

    @property
    def key_bytes(self) -> bytes:
        """The same key as on the turn topic."""
        return turn_key(self.session_id, self.inference_call_id)

    @property
    def headers(self) -> list[tuple[str, bytes]]:
        """The turn topic's revision headers, and ``final_reason``."""
        return [
            ("session_id", self.session_id.encode()),
            ("revision", str(self.revision).encode()),
            ("final_after", format_utc(self.final_after).encode()),
            ("final_reason", self.reason.encode()),
        ]


@dataclass(slots=True)
class Outputs:
    """What one step asks the shell to do, and what it counted on the way."""

    turns: list[TurnRevision] = field(default_factory=list)
    dead_letters: list[DeadLetterDict] = field(default_factory=list)
    # Turns gone final, where the caller writes them as they come (replay); the worker
    # writes them after the checkpoint that holds their closing (``worker/final_records.py``).
    finals: list[FinalTurn] = field(default_factory=list)
    # Turns this step closed (``core/finality.py``), each with its session id: they have
    # left their session's state, and the shell keeps them until their final records are
    # written (``state/closed.py``), or writes those at once (replay).
    closed: list[tuple[str, EmittedTurn]] = field(default_factory=list)
    counts: Counter[Count] = field(default_factory=Counts)
    outcome: Outcome | None = None  # of the record this step consumed, if it consumed one
    # Records applied before that this step found to be copies (a Codex resend met by the
    # copy with its path): taken back out of the session, each now a counted duplicate.
    replaced: list[Source] = field(default_factory=list)

    def extend(self, other: Outputs) -> None:
        self.turns.extend(other.turns)
        self.dead_letters.extend(other.dead_letters)
        self.finals.extend(other.finals)
        self.closed.extend(other.closed)
        self.counts.update(other.counts)
        self.replaced.extend(other.replaced)


def dump_input(item: SessionInput) -> bytes:
    """A session input as bytes, to cross the repartition topic between intake and state.

    Workers of two releases read each other's: these bytes are format 1 of that topic's
    records (``worker.INTERNAL_FORMAT``, as release 31bff95 wrote them); a change to them is
    a new format, which ``load_input`` must read a release before it is written
    (docs/operations.md, "Versions side by side")."""
    if isinstance(item, SessionMessage):
        return jsonbytes.dumps(
            {
                "m": [
                    item.session_id,
                    item.identity,
                    item.sequence,
                    item.message,
                    item.inference_call_id,
                    item.size,
                    item.origin.fields(),
                    item.timestamp,
                ]
            }
        )
    return jsonbytes.dumps(
        {
            "d": [
                item.session_id,
                item.decision,
                item.natural_key,
                item.codex_sibling,
                item.origin.fields(),
                item.timestamp,
            ]
        }
    )


def load_input(data: bytes) -> SessionInput:
    doc = orjson.loads(data)
    if "m" in doc:
        session_id, identity, sequence, message, call_id, size, origin, at = doc["m"]
        json = jsonbytes.dumps(message)  # as intake made it
        return SessionMessage(
            session_id, identity, sequence, message, call_id, size, Origin(*origin), at, json
        )
    session_id, decision, key, sibling, origin, at = doc["d"]
    return SessionDecision(session_id, decision, key, sibling, Origin(*origin), at)

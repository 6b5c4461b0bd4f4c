"""How a session's state is laid out in its tables, so that a checkpoint writes what changed.

A session is a small **head** in ``sessions`` (keyed by the session id) and its **entries**
in ``entries``: one record per pending message, stored decision, open turn and group of
identities a turn made remembered (``core/session.py``), keyed ``[session_id, epoch, kind,
n]``. A turn's body is in ``turn_bodies``, written once. A record's writes are then its
own entries and the head, whatever else the session holds.

The changelogs are topics with no transactions: a worker may stop between any two writes of
a checkpoint, and the worker that takes over reads again from the last committed offset.
So what a head names must be read back exactly, whatever was written after it. The rules:

- **E1 (generations).** A checkpoint writes a session's generation ``g`` = its head's + 1:
  first every entry made since the last one, stamped ``g``; when the broker has them, the
  head, stamped ``g`` and listing the entries dropped at ``g``; then those entries are
  deleted. The next checkpoint starts once the deletions are acknowledged, so a head need
  list only its own generation's drops.
- **E2 (reading).** Read against a head of generation ``G``, an entry is live when it is
  stamped ``<= G`` and the head does not list it. What a stopped checkpoint wrote past its
  head (entries stamped ``> G``) is garbage, and so is every entry of another epoch and
  every entry the head lists; a read lists the garbage and the next checkpoint deletes it
  before it writes.
- **E3 (epochs).** A session that expires and starts again within one checkpoint takes the
  next epoch, so its entries never meet its predecessor's, which go after its head is
  written. A session with no head has no live entry.
- **E4 (never rewritten).** Entries never change once made: a changed turn is a new entry
  and the old one a drop, so a write that stops half-way never leaves an entry that is
  neither its old nor its new value.

**Formats.** Every head names the format its session's records are written in
(``STATE_FORMAT``; a head without one is format 1, written before there was one). A release
reads every format before its own, migrating on read (each decoder below takes the older
layouts it has met). One that meets a newer format neither reads it as unreadable nor
deletes or rewrites it: it raises ``StateFormatNewer`` and the worker stops processing
(``app.py``), so a rollback onto newer state fails loudly and can be rolled forward with
nothing lost. A change to any record's layout (head, entries, bodies, the collapse, the due
index or the final keys) takes the next number.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from functools import partial
from typing import Any, NotRequired, TypedDict

import orjson

from stream_app.core import jsonbytes
from stream_app.core.records import turn_key
from stream_app.core.session import (
    DECISION,
    IDENTITY,
    MESSAGE,
    TURN,
    EmittedTurn,
    Entry,
    EntryKind,
    PendingMessage,
    RememberedIdentities,
    SessionState,
    StoredDecision,
    kind_of,
    load_turn,
)
from stream_app.models.turn import TurnBodyDict
from stream_app.state.written import Written

# The format of the records this release writes (module docstring). 1: no "format" in the
# head (releases up to 31bff95); 2: the head names it, the final keys table exists.
STATE_FORMAT = 2


class StateFormatNewer(Exception):
    """Stored state of a format this release does not know: written by a newer release."""

    def __init__(self, table: str, found: object, key: bytes = b"") -> None:
        self.table, self.found, self.key = table, found, key
        super().__init__(
            f"table {table!r} holds state of format {found!r}, newer than this release's "
            f"{STATE_FORMAT}: roll forward to the release that wrote it"
        )


# An entry record's fields after its generation, as orjson reads them: their layout is
# its kind's (``encode``), so they are read by position.
Fields = list[Any]


class Head(TypedDict):
    format: NotRequired[int]  # absent: format 1
    # The late-decision window ``due`` was made with (absent in format 1; None: no index)
    window: NotRequired[float | None]
    # The idle time (``session_ttl_seconds``) ``due`` was made with: absent before the index
    # held each session's expiry (a release before issue 50), None with no index. Older
    # releases of format 2 ignore it, and take ``due`` for the key it is.
    ttl: NotRequired[float | None]
    session_id: str
    epoch: int
    generation: int
    last_seen: float
    applied: dict[str, int]
    applied_at: dict[str, float]
    next_entry: int
    oldest: float | None  # the oldest open turn's emission instant: what a refile needs
    dropped: list[tuple[str, int]]  # the entries dropped at this generation (E1)
    # The instant of the session's key in the due index (``state/due.py``), its next instant
    # when written (``core/finality.next_at``; before issue 50, its turns' only, None for a
    # session with no turn); absent in heads written before there was an index.
    due: NotRequired[float | None]
    # The closed turns still to be written (``state/closed.py``), by entry: [n, reason,
    # final_after]. A turn's entry does not change when it closes; absent when none is.
    closed: NotRequired[list[tuple[int, str, float]]]
    # What waits, for the waiting report to see without decoding the session
    # (``core/waiting.py``, ``TableSessions.waits``):
    # [when the oldest arrived, how many], of the pending messages and of the decisions
    # waiting for their turn; absent when none waits (or its instant is not known).
    pending: NotRequired[tuple[float, int]]
    waiting: NotRequired[tuple[float, int]]


def session_prefix(session_id: str) -> bytes:
    """What every key of the session in ``entries`` and ``decisions`` (both JSON arrays
    that start with the session id), and no other, starts with."""
    return orjson.dumps([session_id])[:-1] + b","


def epoch_prefix(session_id: str, epoch: int) -> bytes:
    return orjson.dumps([session_id, epoch])[:-1] + b","


def entry_key(session_id: str, epoch: int, kind: str, n: int) -> bytes:
    return jsonbytes.dumps([session_id, epoch, kind, n])


def head(
    state: SessionState,
    written: Written,
    dropped: Iterable[tuple[str, int]] = (),
    window: float | None = None,
    ttl: float | None = None,
    closed: Collection[EmittedTurn] = (),
) -> bytes:
    """The head of ``state`` as ``written`` says the store writes it (its epoch, generation
    and due-index instant), naming its ``closed`` turns still to be written. ``window`` and
    ``ttl``: the late-decision window and idle time the head's ``due`` was made with, when
    the store keeps a due index (``state/due.py``): a worker started with others files the
    session again."""
    oldest = next(iter(state.turns.values()), None)
    value: Head = {
        "format": STATE_FORMAT,
        "window": window,
        "ttl": ttl,
        "session_id": state.session_id,
        "epoch": written.epoch,
        "generation": written.generation,
        "last_seen": state.last_seen,
        "applied": state.applied,
        "applied_at": state.applied_at,
        "next_entry": state.next_entry,
        "oldest": None if oldest is None else oldest.emitted_at,
        "dropped": list(dropped),
        "due": written.due,
    }
    if closed:
        value["closed"] = [(t.entry, *t.closed) for t in closed if t.closed]
    if (pending := state.messages_wait) is not None:
        value["pending"] = pending
    if (waiting := state.decisions_wait) is not None:
        value["waiting"] = waiting
    return jsonbytes.dumps(value)


def head_prefix(window: float | None, ttl: float | None) -> bytes:
    """How every head this release writes with ``window`` and ``ttl`` begins."""
    return orjson.dumps({"format": STATE_FORMAT, "window": window, "ttl": ttl})[:-1] + b","


def names_waiting(data: bytes) -> bool:
    """Whether a head may say that something waits (``pending`` or ``waiting``), by its bytes:
    a false yes costs a parse, never a wrong answer."""
    return b'"pending":' in data or b'"waiting":' in data


def read_head(data: bytes) -> Head:
    """A stored head; ``StateFormatNewer`` for one of a newer format than this release's."""
    doc: Head = orjson.loads(data)
    if isinstance(doc, dict):
        found = doc.get("format", 1)
        if not isinstance(found, int) or found > STATE_FORMAT:
            raise StateFormatNewer("sessions", found, data[:0])
    return doc


def encode(kind: EntryKind, entry: Entry, generation: int) -> bytes:
    if isinstance(entry, PendingMessage):
        p = entry
        return jsonbytes.dumps(
            [generation, p.position, p.identity, p.sequence, p.size, orjson.Fragment(p.json())]
        )
    if isinstance(entry, StoredDecision):
        return jsonbytes.dumps([generation, entry.json()])
    if isinstance(entry, RememberedIdentities):
        return jsonbytes.dumps([generation, entry.position, entry.identities])
    return jsonbytes.dumps([generation, entry.meta()])


def records(
    state: SessionState, written: Written | None = None, closed: Collection[EmittedTurn] = ()
) -> tuple[bytes, list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]]:
    """The head, entries and turn bodies the tables would hold for the state and its
    ``closed`` turns still to be written, written whole (at the epoch and generation
    ``written`` names; none: the first of both): what a reader of the changelogs can see of
    a session."""
    written = Written() if written is None else written
    sid, g, epoch = state.session_id, written.generation, written.epoch
    made: list[tuple[EntryKind, int, Entry]] = [
        *((MESSAGE, p.entry, p) for p in state.pending_messages.values()),
        *((DECISION, d.entry, d) for d in state.waiting_decisions.values()),
        *((DECISION, d.entry, d) for t in state.turns.values() for d in t.decisions),
        *((DECISION, d.entry, d) for t in closed for d in t.decisions),
        *((TURN, t.entry, t) for t in state.turns.values()),
        *((TURN, t.entry, t) for t in closed),
        *((IDENTITY, g.entry, g) for g in state.remembered.values()),
    ]
    items = [(entry_key(sid, epoch, k, n), encode(k, e, g)) for k, n, e in made]
    bodies = [(turn_key(sid, t.call_id), t.body_json()) for t in (*state.turns.values(), *closed)]
    return head(state, written, closed=closed), items, bodies


# A record's value, or how to make it: entries that never change are serialized when the
# checkpoint writes them, off the agent's turn (``TableSessions.write``); what can still
# change (a turn's decisions and revision, the head) is serialized when it is sealed.
Value = bytes | Callable[[], bytes]


class Changes(TypedDict):
    """One session's writes at one checkpoint, in the order E1 writes them."""

    before: dict[bytes, Value | None]  # entries, before the head
    bodies: dict[bytes, Value]  # turn bodies of new turns, before the head
    dropped: list[tuple[str, int]]  # what the head lists (E1)
    after: list[bytes]  # entries deleted after the head
    dropped_bodies: list[bytes]  # turn bodies deleted after the head


def changes(
    state: SessionState,
    written: Written,
    garbage: Iterable[bytes],
    body_key: Callable[[str], bytes],
    closed: Mapping[str, EmittedTurn],
) -> Changes:
    """What ``state`` writes at its next generation (E1): the changes ``written`` noted as
    its journal, which it takes, moving its generation on; ``garbage`` is deleted first (E2), so
    a new entry that reuses a stopped checkpoint's key survives. ``closed``: the session's
    closed turns still to be written, whose bodies stay."""
    made, dropped = written.take()
    first_new, written.next_entry = written.next_entry, state.next_entry
    written.generation += 1
    g, sid, epoch = written.generation, state.session_id, written.epoch
    out: Changes = {"before": {}, "bodies": {}, "dropped": [], "after": [], "dropped_bodies": []}
    before, bodies = out["before"], out["bodies"]
    for key in garbage:
        before[key] = None
    for n, entry in made.items():
        kind = kind_of(entry)
        key = entry_key(sid, epoch, kind, n)
        before.pop(key, None)  # garbage under a key reused: the new entry replaces it
        if isinstance(entry, EmittedTurn):  # its decisions and revision change later
            before[key] = encode(kind, entry, g)
            if entry.born >= first_new:  # a new turn
                bodies[body_key(entry.call_id)] = entry.body_json
        else:
            before[key] = partial(encode, kind, entry, g)
    for n, entry in dropped.items():
        kind = kind_of(entry)
        out["dropped"].append((kind, n))
        out["after"].append(entry_key(sid, epoch, kind, n))
        if not isinstance(entry, EmittedTurn) or entry is (
            state.turns.get(entry.call_id) or closed.get(entry.call_id)
        ):
            continue  # not a turn, or a turn revised or closed: its body stays
        if (key := body_key(entry.call_id)) not in bodies:  # not a new turn's, same id
            out["dropped_bodies"].append(key)
    return out


def decode(
    data: bytes,
    items: Iterable[tuple[bytes, bytes]],
    body: Callable[[str], TurnBodyDict | None],
) -> tuple[SessionState, Written, list[bytes], dict[str, EmittedTurn]]:
    """The state a head names (E2), what was written of it (its epoch, generation, due
    instant: the state's journal from now on), the garbage keys found beside it, and its
    closed turns still to be written, in the order they closed (the head's ``closed``
    marks: ``state/closed.py`` keeps them).

    ``items`` are the session's entry records; ``body`` gives a turn's body by its
    ``inference_call_id``, or None when it cannot (the turn is left out: it can no longer be
    revised, and its decisions go with it)."""
    doc = read_head(data)
    epoch, generation = doc["epoch"], doc["generation"]
    dropped = {(kind, n) for kind, n in doc["dropped"]}
    garbage: list[bytes] = []
    found: dict[tuple[str, int], tuple[bytes, Fields]] = {}
    for key, value in items:
        try:
            _, key_epoch, kind, n = orjson.loads(key)
            stamped = orjson.loads(value)
        except (orjson.JSONDecodeError, ValueError):  # not a record this layout writes
            garbage.append(key)
            continue
        if key_epoch != epoch or stamped[0] > generation or (kind, n) in dropped:
            garbage.append(key)  # another epoch's, a stopped checkpoint's, or dropped
        else:
            found[(kind, n)] = (key, stamped[1:])

    def of(kind: str) -> list[tuple[int, Fields]]:
        return sorted((n, v) for (k, n), (_, v) in found.items() if k == kind)

    decisions = {n: StoredDecision.load(v[0], n) for n, v in of(DECISION)}
    turns: dict[str, EmittedTurn] = {}
    closed: dict[str, EmittedTurn] = {}
    marks = {n: (str(reason), float(at)) for n, reason, at in doc.get("closed", ())}
    for n, (meta,) in sorted(of(TURN), key=lambda item: item[1][0][4]):  # by ``born``
        turn_body = body(meta[0])
        joined = [decisions.pop(d) for d in meta[6] if d in decisions]
        if turn_body is None:
            garbage += [found[(TURN, n)][0], *(found[(DECISION, d.entry)][0] for d in joined)]
            continue
        turn = load_turn(turn_body, meta, n, joined)
        turn.closed = marks.get(n, turn.closed)
        (turns if turn.closed is None else closed)[turn.call_id] = turn
    pending = {}
    for n, (position, identity, sequence, size, message) in sorted(
        of(MESSAGE), key=lambda item: item[1][0]
    ):
        pending[position] = PendingMessage(identity, sequence, message, size, n, position)
    state = SessionState(
        session_id=doc["session_id"],
        last_seen=doc["last_seen"],
        pending_messages=pending,
        pending_since=doc["pending"][0] if pending and "pending" in doc else None,
        turns=turns,
        waiting_decisions=decisions,
        remembered=remembered(of(IDENTITY)),
        applied=doc["applied"],
        applied_at=doc["applied_at"],
        next_entry=doc["next_entry"],
    )
    written = Written(epoch, generation, doc["next_entry"], doc.get("due"))
    return state, written, garbage, closed


def remembered(found: list[tuple[int, Fields]]) -> dict[int, RememberedIdentities]:
    """The remembered identities by position, oldest first; an entry of one identity alone
    (``[generation, identity]``) is the layout before groups, read as a group of one."""
    groups = [
        RememberedIdentities([fields[0]], n, n)
        if len(fields) == 1
        else RememberedIdentities(fields[1], n, fields[0])
        for n, fields in found
    ]
    return {g.position: g for g in sorted(groups, key=lambda g: g.position)}

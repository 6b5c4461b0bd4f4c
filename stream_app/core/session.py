"""One session's state: a plain value that round-trips through JSON.

It holds what arrived since the last turn, the turns still open to late decisions, the
decisions waiting for their turn, and the identities of messages already emitted (so
redeliveries are recognised; decisions are recognised by the collapse table,
``core/collapse.py``).

Every structure is bounded by the policy's limits (``core/assembler.py`` keeps them) and
every look-up a record makes is indexed, so a record costs the same whatever its session
holds. A state is made of **entries**, numbered in the order they were made: each pending
message, stored decision, open turn and remembered identity is one. An entry never changes
once made (a turn that gains a decision becomes a new entry), and the state tells its
``journal`` of each entry it makes or drops, so a store writes what changed, not the whole
session (``state/entries.py``).

The core knows no storage: what a store wrote of a session (generations, the entries written,
its due-index key) is the store's own record, kept beside the state (``state/written.py``),
which the store hands the state as its journal; so are the turns closed and waiting for their
final records (``state/closed.py``): a turn that closes leaves the state, as an output of the
step that closed it (``Outputs.closed``), its entries handed over, not dropped.

A journal, not a diff: a store that compared the entries it wrote with the state's would
walk the whole session at every checkpoint, so what a record costs would grow with its
session; told of each change as it is made, the store's work follows the record's changes
alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Literal, Protocol

import orjson

from stream_app.core import jsonbytes
from stream_app.core.collapse import codex_sibling
from stream_app.core.policy import Policy
from stream_app.core.records import Origin, OriginFields
from stream_app.models.decision import DecisionDict
from stream_app.models.turn import InferenceMessageDict, TurnBodyDict, TurnDict

EntryKind = Literal["m", "d", "t", "i"]
MESSAGE: EntryKind = "m"  # a pending message
DECISION: EntryKind = "d"  # a stored decision, waiting or joined to a turn
TURN: EntryKind = "t"  # an open turn: its ids, instant, revision and decisions
IDENTITY: EntryKind = "i"  # the message identities a turn made remembered

# The JSON arrays a state is written as (read back as lists: they are unpacked, never
# compared). A stored decision: the decision, its ``occurred_at`` instant, its origin, and
# when it began to wait for its turn (``StoredDecision.arrived``; left out when None).
StoredDecisionFields = (
    tuple[DecisionDict, int, OriginFields] | tuple[DecisionDict, int, OriginFields, float]
)
# A closed turn's reason and ``final_after`` (``core/finality.py``).
Closed = tuple[str, float]
# A turn's entry (``EmittedTurn.meta``): inference_call_id, reach, emitted_at, revision,
# born, size, the entries of its decisions, and ``closed`` (null while it is open).
TurnMeta = tuple[str, list[str], float, int, int, int, list[int], Closed | None]


@dataclass(slots=True)
class PendingMessage:
    identity: str | None
    sequence: int | None
    message: InferenceMessageDict
    size: int = 0  # bytes of the message's JSON: what ``max_pending_bytes`` counts
    entry: int = 0
    position: int = 0  # its place in arrival order: the entry of its first copy
    # Derived, never compared: the message as state JSON, made once.
    _json: bytes | None = field(default=None, compare=False, repr=False)

    def json(self) -> bytes:
        if self._json is None:
            self._json = jsonbytes.dumps(self.message)
        return self._json


@dataclass(slots=True)
class StoredDecision:
    decision: DecisionDict
    order: tuple[int, str]  # (occurred_at instant, decision_id): the order within a turn
    origin: Origin  # kept so that a later ambiguity or expiry can still dead-letter it
    entry: int = 0
    # When the session stored it to wait for its turn (``now`` then), for a sweep to tell
    # how long decisions wait (``core/waiting.py``); None for a decision that joined a turn
    # at once, and for one stored before this was kept.
    arrived: float | None = None
    # Derived, never stored: this decision as state JSON. A stored decision never changes.
    _json: bytes | None = field(default=None, compare=False, repr=False)
    # Derived, never stored: for a pathless ``codex`` decision with a call_id, its Codex
    # sibling key (``core/collapse.py``), under which a copy with the path finds it.
    resend_of: str | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        d = self.decision
        if d["file_path"] == "" and d["agent_harness"] == "codex" and d["call_id"] is not None:
            self.resend_of = codex_sibling(d)

    @property
    def call_id(self) -> str:
        return str(self.decision["call_id"])

    @property
    def source(self) -> tuple[str, int, int]:
        return (self.origin.source_topic, self.origin.partition, self.origin.offset)

    def json(self) -> orjson.Fragment:
        if self._json is None:
            fields: StoredDecisionFields = (self.decision, self.order[0], self.origin.fields())
            if self.arrived is not None:
                fields = (*fields, self.arrived)
            self._json = jsonbytes.dumps(fields)
        return orjson.Fragment(self._json)

    @staticmethod
    def load(doc: StoredDecisionFields, entry: int) -> StoredDecision:
        decision, instant, origin = doc[:3]
        arrived = doc[3] if len(doc) > 3 else None
        key = (instant, decision["decision_id"])
        return StoredDecision(decision, key, Origin(*origin), entry, arrived)


@dataclass(slots=True)
class EmittedTurn:
    body: TurnBodyDict
    reach: list[str]  # inference_call_id and tool-call ids: what a decision's call_id can name
    emitted_at: float
    decisions: list[StoredDecision] = field(default_factory=list)
    # The number of the latest revision emitted (1: the first emission). Kept in the state,
    # not counted by the shell, so that a worker restarted from its changelog, and replay,
    # number a turn's revisions alike (the ``revision`` header of the turn topic).
    revision: int = 1
    entry: int = 0
    born: int = 0  # its first entry: the turns' order, which ``expire`` walks
    size: int = 0  # bytes of its first revision's Turn JSON: what ``max_open_turn_bytes`` counts
    # Set when the turn closes (``SessionState.close_turn``): why it is final and the
    # ``final_after`` its revisions carried. A closed turn never changes again.
    closed: Closed | None = None
    # Derived, never stored: ``new_messages`` as JSON, joined from its messages' own when
    # the turn is made (each was serialized once, at intake), kept until its body is made
    # (``body_json``); a later revision serializes the messages again.
    messages_json: bytes | None = field(default=None, compare=False, repr=False)

    @property
    def call_id(self) -> str:
        return str(self.body["inference_call_id"])

    def final_after(self, policy: Policy) -> float:
        """The instant after which nothing can revise this turn: ``expire`` drops it then.

        Emission instants never decrease within a session (``stamp``), so the turns expire
        in the order they were added and no turn outlives this instant in the state.
        """
        return self.emitted_at + policy.late_decision_window_seconds

    def render(self) -> TurnDict:
        """The complete Turn, fields in schema order."""
        body = self.body
        return {
            "new_messages": body["new_messages"],
            "completion": body["completion"],
            "decisions": [d.decision for d in sorted(self.decisions, key=_ORDER)],
            "inference_call_id": body["inference_call_id"],
            "tool_calls": body["tool_calls"],
        }

    def rendered(self) -> tuple[TurnDict, bytes]:
        """The complete Turn and its JSON, the messages' JSON made once per turn."""
        turn = self.render()
        return turn, jsonbytes.dumps({**turn, "new_messages": self._messages_fragment()})

    def body_json(self) -> bytes:
        """The body as ``turn_bodies`` holds it: the same bytes as ``dumps(body)``. Its
        messages' JSON is let go once the body is made (the body is written once): an
        open turn would otherwise hold its messages twice for its whole window."""
        body = jsonbytes.dumps({**self.body, "new_messages": self._messages_fragment()})
        self.messages_json = None
        return body

    def _messages_fragment(self) -> orjson.Fragment:
        if self.messages_json is None:
            return orjson.Fragment(jsonbytes.dumps(self.body["new_messages"]))
        return orjson.Fragment(self.messages_json)

    def meta(self) -> TurnMeta:
        """The turn's entry without its body (``turn_bodies`` holds that, written once)."""
        return (
            self.call_id,
            self.reach,
            self.emitted_at,
            self.revision,
            self.born,
            self.size,
            [d.entry for d in self.decisions],
            self.closed,
        )


_ORDER = attrgetter("order")  # a turn's decisions: by occurred_at instant, then decision_id
_ENTRY = attrgetter("entry")

# The most identities one entry holds: a turn of more is several entries, so a group partly
# forgotten (``SessionState.remember``) is rewritten at a bounded cost.
IDENTITY_GROUP = 16


@dataclass(slots=True)
class RememberedIdentities:
    """The identities one turn made remembered: an entry, not one per identity, since a
    changelog record costs the same whatever it holds, and a record per identity would be
    most of the changelog records an input record makes. A group the limit forgets
    the oldest of is replaced by the rest, in its place (``position``)."""

    identities: list[str]
    entry: int = 0
    position: int = 0  # its place in remembering order: the entry of its first copy


Entry = PendingMessage | StoredDecision | EmittedTurn | RememberedIdentities
_KINDS: dict[type, EntryKind] = {
    PendingMessage: MESSAGE,
    StoredDecision: DECISION,
    EmittedTurn: TURN,
    RememberedIdentities: IDENTITY,
}


def kind_of(entry: Entry) -> EntryKind:
    """The kind an entry is stored under (its key in the entries table)."""
    return _KINDS[type(entry)]


class Journal(Protocol):
    """Told of each entry a state makes and of each it drops (``SessionState.journal``),
    numbered (numbers are unique across kinds; ``kind_of`` tells the kind): a store's, which
    writes what changed (``state/written.py``)."""

    def made(self, n: int, entry: Entry) -> None: ...

    def dropped(self, n: int, entry: Entry) -> None: ...


@dataclass(slots=True)
class SessionState:
    session_id: str
    last_seen: float
    # Pending messages by position (the entry of a message's first copy), in arrival order.
    pending_messages: dict[int, PendingMessage] = field(default_factory=dict)
    # When the oldest of them arrived (``now`` then): the list only ever empties whole (a
    # turn takes them all), so this is the instant the list last stopped being empty. None
    # when there are none (or for a state written before this was kept, until its next turn).
    pending_since: float | None = None
    turns: dict[str, EmittedTurn] = field(default_factory=dict)  # by inference_call_id
    waiting_decisions: dict[int, StoredDecision] = field(default_factory=dict)  # by entry
    # Identities of messages emitted in a turn (and "call:<id>" of each turn), a group per
    # turn by position, oldest first; past ``max_remembered_identities`` the oldest are
    # forgotten (``remember``).
    remembered: dict[int, RememberedIdentities] = field(default_factory=dict)
    # Highest offset applied per source "topic:partition". After a crash a worker reads
    # again from its last commit; records at or below these offsets were already applied.
    applied: dict[str, int] = field(default_factory=dict)
    # The newest record timestamp applied per source: a record below ``applied`` stamped
    # later is new (its topic's offsets started again, ``core/assembler.py``).
    applied_at: dict[str, float] = field(default_factory=dict)
    next_entry: int = 0
    # Told of each entry made and dropped: the store's that holds the state (None: none
    # is told, as for a state no store holds yet, which a store writes whole).
    journal: Journal | None = field(default=None, compare=False, repr=False)
    # Derived, never stored: the indexes every look-up goes through.
    _reach: dict[str, list[str]] = field(default_factory=dict, compare=False, repr=False)
    # Every remembered identity, oldest first, with the position of its group.
    seen_messages: dict[str, int] = field(default_factory=dict, compare=False, repr=False)
    _pending_by_identity: dict[str, int] = field(default_factory=dict, compare=False, repr=False)
    _waiting_by_call: dict[str, dict[int, None]] = field(
        default_factory=dict, compare=False, repr=False
    )
    # The decisions held (waiting, or joined to an open turn) by decision_id, and the
    # pathless Codex resends among them by their sibling key (``StoredDecision.resend_of``).
    _held: dict[str, StoredDecision] = field(default_factory=dict, compare=False, repr=False)
    _resends: dict[str, dict[int, StoredDecision]] = field(
        default_factory=dict, compare=False, repr=False
    )
    pending_bytes: int = field(default=0, compare=False, repr=False)
    unsequenced: int = field(default=0, compare=False, repr=False)  # pending with no sequence
    open_turn_bytes: int = field(default=0, compare=False, repr=False)

    def __post_init__(self) -> None:
        for key, turn in self.turns.items():
            self.open_turn_bytes += turn.size
            for rid in turn.reach:
                self._reach.setdefault(rid, []).append(key)
        for position, p in self.pending_messages.items():
            self._index_pending(position, p)
        for d in self.waiting_decisions.values():
            self._waiting_by_call.setdefault(d.call_id, {})[d.entry] = None
            self._hold(d)
        for turn in self.turns.values():
            for d in turn.decisions:
                self._hold(d)
        for position, group in self.remembered.items():
            self.seen_messages.update(dict.fromkeys(group.identities, position))

    @property
    def pending(self) -> list[PendingMessage]:
        """The pending messages in arrival order."""
        return list(self.pending_messages.values())

    @property
    def waiting(self) -> list[StoredDecision]:
        """The decisions waiting for their turn, in arrival order."""
        return list(self.waiting_decisions.values())

    @property
    def waiting_since(self) -> float | None:
        """When the oldest decision waiting for its turn arrived (the first in arrival
        order), or None."""
        oldest = next(iter(self.waiting_decisions.values()), None)
        return None if oldest is None else oldest.arrived

    @property
    def messages_wait(self) -> tuple[float, int] | None:
        """When the oldest pending message arrived and how many are pending; None when none
        is (or its instant is not known): what a head says, and a sweep reads."""
        if not self.pending_messages or self.pending_since is None:
            return None
        return self.pending_since, len(self.pending_messages)

    @property
    def decisions_wait(self) -> tuple[float, int] | None:
        """The same for the decisions waiting for their turn."""
        since = self.waiting_since
        return None if since is None else (since, len(self.waiting_decisions))

    # -- entries ---------------------------------------------------------------------

    def _made(self, entry: Entry) -> int:
        n = self.next_entry
        self.next_entry = n + 1
        if self.journal is not None:
            self.journal.made(n, entry)
        return n

    def _dropped(self, n: int, entry: Entry) -> None:
        if self.journal is not None:
            self.journal.dropped(n, entry)

    def entries(self) -> list[Entry]:
        """Every entry the state holds, in the order they were made: a state written whole
        (a store's first write of it)."""
        held: list[Entry] = [
            *self.pending_messages.values(),
            *self.waiting_decisions.values(),
            *(d for t in self.turns.values() for d in t.decisions),
            *self.turns.values(),
            *self.remembered.values(),
        ]
        return sorted(held, key=_ENTRY)

    # -- pending messages ------------------------------------------------------------

    def _index_pending(self, position: int, p: PendingMessage) -> None:
        if p.identity is not None:
            self._pending_by_identity[p.identity] = position
        self.pending_bytes += p.size
        self.unsequenced += p.sequence is None

    def pending_with(self, identity: str | None) -> PendingMessage | None:
        if identity is None:
            return None
        position = self._pending_by_identity.get(identity)
        return None if position is None else self.pending_messages[position]

    def add_pending(self, p: PendingMessage, now: float) -> None:
        """Appends a message, or replaces the pending copy with its identity in place."""
        if self.pending_since is None:
            self.pending_since = now
        position = self._pending_by_identity.get(p.identity) if p.identity else None
        p.entry = self._made(p)
        if position is None:
            position = p.entry
        else:
            old = self.pending_messages[position]
            self._dropped(old.entry, old)
            self.pending_bytes -= old.size
            self.unsequenced -= old.sequence is None
        p.position = position
        self.pending_messages[position] = p
        self._index_pending(position, p)

    def take_pending(self) -> list[PendingMessage]:
        """Every pending message, in arrival order; the pending list is left empty."""
        taken = list(self.pending_messages.values())
        if (journal := self.journal) is not None:
            for p in taken:
                journal.dropped(p.entry, p)
        self.pending_messages = {}
        self._pending_by_identity = {}
        self.pending_bytes = self.unsequenced = 0
        self.pending_since = None
        return taken

    # -- remembered identities -------------------------------------------------------

    def remember(self, identities: Iterable[str], limit: int) -> int:
        """Remembers a turn's identities, those not remembered yet, in entries of at most
        ``IDENTITY_GROUP``; forgets the oldest past ``limit``, exactly as many as one entry
        per identity would: how many it forgot. A group partly forgotten becomes a new entry
        of the rest in the old one's place (E4 of ``state/entries.py``: an entry never
        changes), so a record rewrites at most one group besides its own, whatever the size
        of the turns before it."""
        seen = self.seen_messages
        new = [i for i in dict.fromkeys(identities) if i not in seen]
        for start in range(0, len(new), IDENTITY_GROUP):
            group = RememberedIdentities(new[start : start + IDENTITY_GROUP])
            group.entry = group.position = n = self._made(group)
            self.remembered[n] = group
            seen.update(dict.fromkeys(group.identities, n))
        excess = forgot = len(seen) - limit
        if excess <= 0:
            return 0
        while excess:
            position, oldest = next(iter(self.remembered.items()))
            self._dropped(oldest.entry, oldest)
            gone, kept = oldest.identities[:excess], oldest.identities[excess:]
            for identity in gone:
                del seen[identity]
            excess -= len(gone)
            if kept:
                rest = RememberedIdentities(kept, position=position)
                rest.entry = self._made(rest)
                self.remembered[position] = rest  # a key kept keeps its place in the order
            else:
                del self.remembered[position]
        return forgot

    # -- decisions -------------------------------------------------------------------

    def _hold(self, d: StoredDecision) -> None:
        self._held[d.decision["decision_id"]] = d
        if d.resend_of is not None:
            self._resends.setdefault(d.resend_of, {})[d.entry] = d

    def store_decision(self, d: StoredDecision) -> None:
        d.entry = self._made(d)
        self._hold(d)

    def drop_decision(self, d: StoredDecision) -> None:
        self._dropped(d.entry, d)
        self._unhold(d)

    def _unhold(self, d: StoredDecision) -> None:
        """Forgets ``d`` by its id and as a resend (``_hold`` undone)."""
        decision_id = d.decision["decision_id"]
        if self._held.get(decision_id) is d:
            del self._held[decision_id]
        if d.resend_of is not None and (resends := self._resends.get(d.resend_of)):
            resends.pop(d.entry, None)
            if not resends:
                del self._resends[d.resend_of]

    def held_with_id(self, decision_id: str) -> StoredDecision | None:
        """The decision the session holds under this id, waiting or joined to a turn."""
        return self._held.get(decision_id)

    def resends_of(self, sibling: str) -> list[StoredDecision]:
        """The pathless Codex resends held whose copy with the path has this sibling key."""
        resends = self._resends.get(sibling)
        return [] if resends is None else list(resends.values())

    def take_out(self, d: StoredDecision) -> EmittedTurn | None:
        """Drops a held decision: out of the waiting ones, or out of the turn it joined,
        which is returned (to be emitted again). A joined decision is on the one turn its
        call_id reaches: one that comes to reach more turns leaves them (``assembler``)."""
        self.drop_decision(d)
        if self.waiting_decisions.pop(d.entry, None) is not None:
            entries = self._waiting_by_call[d.call_id]
            del entries[d.entry]
            if not entries:
                del self._waiting_by_call[d.call_id]
            return None
        for turn in self.turns_reaching(d.call_id):
            if any(joined is d for joined in turn.decisions):
                turn.decisions = [joined for joined in turn.decisions if joined is not d]
                return turn
        return None

    def add_waiting(self, d: StoredDecision, now: float) -> None:
        d.arrived = now
        self.store_decision(d)
        self.waiting_decisions[d.entry] = d
        self._waiting_by_call.setdefault(d.call_id, {})[d.entry] = None

    def take_waiting(self, call_ids: list[str]) -> list[StoredDecision]:
        """The decisions waiting for any of ``call_ids``, id by id in arrival order, no
        longer waiting (most sessions have none waiting: nothing to look up)."""
        if not self.waiting_decisions:
            return []
        taken: list[StoredDecision] = []
        for call_id in call_ids:
            entries = self._waiting_by_call.pop(call_id, None)
            if entries is not None:
                taken.extend(self.waiting_decisions.pop(n) for n in entries)
        return taken

    # -- turns -----------------------------------------------------------------------

    def stamp(self, now: float) -> float:
        """The emission instant of a new turn: ``now``, or the newest turn's if that is later.

        A clock that steps back (or a session moving to a worker whose clock is behind)
        would otherwise give a newer turn an earlier instant; ``expire`` stops at the first
        turn still open, so such a turn would outlive the ``final_after`` it was sent with.
        """
        newest = next(reversed(self.turns.values()), None)
        return now if newest is None else max(now, newest.emitted_at)

    def turns_reaching(self, call_id: str) -> list[EmittedTurn]:
        return [self.turns[key] for key in self._reach.get(call_id, ())]

    def add_turn(self, turn: EmittedTurn) -> None:
        key = turn.call_id
        turn.entry = turn.born = self._made(turn)
        self.turns[key] = turn
        self.open_turn_bytes += turn.size
        for rid in turn.reach:
            self._reach.setdefault(rid, []).append(key)

    def changed_turn(self, turn: EmittedTurn) -> None:
        """A turn's decisions or revision changed: it is a new entry."""
        self._dropped(turn.entry, turn)
        turn.entry = self._made(turn)

    def close_turn(self, key: str, closed: Closed) -> EmittedTurn:
        """Closes an open turn (``core/finality.py``): no decision reaches it and it never
        changes again. It leaves the state, which no longer holds it or its decisions, but
        its entries are not dropped: the journal is told nothing, as the turn, as it was, is
        handed to whoever keeps it until its final record is written (``state/closed.py``;
        the head names it closed, ``state/entries.py``)."""
        turn = self._take_open(key)
        for d in turn.decisions:  # held no more: nothing can take one out of the turn now
            self._unhold(d)
        turn.closed = closed
        return turn

    def start_again(self, now: float) -> None:
        """The session's expiry, when its closed turns' final records are still to be
        written (``core/expiry.py``): everything goes, an entry at a time, and the session
        goes on as a new one would (no offsets applied, nothing remembered, idle from
        ``now``), its entries numbered on; its store deletes it once those turns are written
        and nothing has been applied since (``core/finality.started_again``)."""
        assert not self.turns, "close the open turns first"
        self.take_pending()
        for d in self.waiting_decisions.values():
            self.drop_decision(d)
        self.waiting_decisions = {}
        self._waiting_by_call = {}
        for group in self.remembered.values():
            self._dropped(group.entry, group)
        self.remembered = {}
        self.seen_messages = {}
        self.applied = {}
        self.applied_at = {}
        self.last_seen = now

    def drop_turn(self, key: str) -> EmittedTurn:
        turn = self._take_open(key)
        self._dropped(turn.entry, turn)
        for d in turn.decisions:
            self.drop_decision(d)
        return turn

    def _take_open(self, key: str) -> EmittedTurn:
        """Takes the turn out of the open turns and out of the ids that reach it."""
        turn = self.turns.pop(key)
        self.open_turn_bytes -= turn.size
        for rid in turn.reach:
            keys = self._reach[rid]
            keys.remove(key)
            if not keys:
                del self._reach[rid]
        return turn

    # -- serialization ---------------------------------------------------------------

    def to_json(self, closed: Iterable[EmittedTurn] = ()) -> bytes:
        """The whole state as JSON, with the session's ``closed`` turns that wait for their
        final records (kept beside it, ``state/closed.py``): for ``/sessions/{id}`` and the
        tests; a store writes entries (``state/entries.py``)."""
        return jsonbytes.dumps(
            {
                "session_id": self.session_id,
                "last_seen": self.last_seen,
                "pending": [
                    [p.entry, p.position, p.identity, p.sequence, p.size, p.message]
                    for p in self.pending_messages.values()
                ],
                "pending_since": self.pending_since,
                "turns": [
                    [t.body, t.meta(), [[d.entry, d.json()] for d in t.decisions], t.entry]
                    for t in self.turns.values()
                ],
                "closed": [
                    [t.body, t.meta(), [[d.entry, d.json()] for d in t.decisions], t.entry]
                    for t in closed
                ],
                "waiting": [[d.entry, d.json()] for d in self.waiting_decisions.values()],
                "remembered": [
                    [g.entry, g.position, g.identities] for g in self.remembered.values()
                ],
                "applied": self.applied,
                "applied_at": self.applied_at,
                "next_entry": self.next_entry,
            }
        )

    @classmethod
    def from_json(cls, data: bytes) -> SessionState:
        """The state ``to_json`` wrote (its closed turns: ``closed_of_json``)."""
        doc = orjson.loads(data)
        turns = _turns_of(doc["turns"])
        return cls(
            session_id=doc["session_id"],
            last_seen=doc["last_seen"],
            pending_messages={
                position: PendingMessage(identity, sequence, message, size, entry, position)
                for entry, position, identity, sequence, size, message in doc["pending"]
            },
            pending_since=doc.get("pending_since"),
            turns=turns,
            waiting_decisions={n: StoredDecision.load(d, n) for n, d in doc["waiting"]},
            remembered={
                position: RememberedIdentities(identities, entry, position)
                for entry, position, identities in doc["remembered"]
            },
            applied=doc["applied"],
            applied_at=doc["applied_at"],
            next_entry=doc["next_entry"],
        )


def closed_of_json(data: bytes) -> dict[str, EmittedTurn]:
    """The closed turns ``SessionState.to_json`` wrote beside the state, in closing order."""
    return _turns_of(orjson.loads(data).get("closed", ()))


# A turn as ``to_json`` writes it: its body, meta, decisions (entry, fields) and entry.
TurnJson = tuple[TurnBodyDict, TurnMeta, list[tuple[int, StoredDecisionFields]], int]


def _turns_of(docs: Iterable[TurnJson]) -> dict[str, EmittedTurn]:
    turns: dict[str, EmittedTurn] = {}
    for body, meta, decisions, entry in docs:
        turn = load_turn(body, meta, entry, [StoredDecision.load(d, n) for n, d in decisions])
        turns[turn.call_id] = turn
    return turns


def load_turn(
    body: TurnBodyDict, meta: TurnMeta, entry: int, decisions: list[StoredDecision]
) -> EmittedTurn:
    """A turn from its body and ``EmittedTurn.meta``, given its decisions in meta's order
    (a meta of seven fields is an open turn's, written before turns could close)."""
    reach, emitted_at, revision, born, size = meta[1:6]
    closed = meta[7] if len(meta) > 7 else None
    return EmittedTurn(
        body,
        reach,
        emitted_at,
        decisions,
        revision,
        entry,
        born,
        size,
        None if closed is None else (str(closed[0]), float(closed[1])),
    )

"""One session's state: a plain value that round-trips through JSON.

It holds what arrived since the last turn, the turns still open to late decisions, the
decisions waiting for their turn, and the identities of messages already seen (so
redeliveries are recognised for as long as the session lives; decisions are recognised by
the collapse table, ``core/collapse.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from stream_app.core import jsonbytes
from stream_app.core.policy import Policy
from stream_app.core.records import Origin


@dataclass(slots=True)
class PendingMessage:
    identity: str | None
    sequence: int | None
    message: dict[str, Any]


@dataclass(slots=True)
class StoredDecision:
    decision: dict[str, Any]
    order: tuple[int, str]  # (occurred_at instant, decision_id): the order within a turn
    origin: Origin  # kept so that a later ambiguity or expiry can still dead-letter it
    # Derived, never stored: this decision as state JSON. A stored decision never changes,
    # and it carries its whole source record, written again at every checkpoint.
    _json: bytes | None = field(default=None, compare=False, repr=False)

    @property
    def call_id(self) -> str:
        return str(self.decision["call_id"])

    def json(self) -> orjson.Fragment:
        if self._json is None:
            o = self.origin
            self._json = jsonbytes.dumps(
                [
                    self.decision,
                    self.order[0],
                    [o.source_topic, o.partition, o.offset, o.key, o.value, o.encoding],
                ]
            )
        return orjson.Fragment(self._json)


@dataclass(slots=True)
class EmittedTurn:
    body: dict[str, Any]  # the Turn without its decisions
    reach: list[str]  # inference_call_id and tool-call ids: what a decision's call_id can name
    emitted_at: float
    decisions: list[StoredDecision] = field(default_factory=list)
    # The number of the latest revision emitted (1: the first emission). Kept in the state,
    # not counted by the shell, so that a worker restarted from its changelog, and replay,
    # number a turn's revisions alike (the ``revision`` header of the turn topic).
    revision: int = 1

    def final_after(self, policy: Policy) -> float:
        """The instant after which nothing can revise this turn: ``expire`` drops it then.

        Emission instants never decrease within a session (``stamp``), so the turns expire
        in the order they were added and no turn outlives this instant in the state.
        """
        return self.emitted_at + policy.late_decision_window_seconds

    def render(self) -> dict[str, Any]:
        """The complete Turn, fields in schema order."""
        body = self.body
        ordered = sorted(self.decisions, key=lambda d: d.order)
        return {
            "new_messages": body["new_messages"],
            "completion": body["completion"],
            "decisions": [d.decision for d in ordered],
            "inference_call_id": body["inference_call_id"],
            "tool_calls": body["tool_calls"],
        }


@dataclass(slots=True)
class SessionState:
    session_id: str
    last_seen: float
    pending: list[PendingMessage] = field(default_factory=list)
    turns: dict[str, EmittedTurn] = field(default_factory=dict)  # by inference_call_id
    waiting: list[StoredDecision] = field(default_factory=list)
    seen_messages: set[str] = field(default_factory=set)
    # Highest offset applied per source "topic:partition". After a crash a worker reads
    # again from its last commit; records at or below these offsets were already applied.
    applied: dict[str, int] = field(default_factory=dict)
    # Derived, never stored: which turns each id reaches (decisions look this up).
    _reach: dict[str, list[str]] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for key, turn in self.turns.items():
            for rid in turn.reach:
                self._reach.setdefault(rid, []).append(key)

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
        key = turn.body["inference_call_id"]
        self.turns[key] = turn
        for rid in turn.reach:
            self._reach.setdefault(rid, []).append(key)

    def drop_turn(self, key: str) -> None:
        turn = self.turns.pop(key)
        for rid in turn.reach:
            keys = self._reach[rid]
            keys.remove(key)
            if not keys:
                del self._reach[rid]

    # -- serialization ---------------------------------------------------------------

    def to_json(self, bodies: bool = True) -> bytes:
        """The state as JSON; without ``bodies`` a turn is named by its key instead, and
        ``from_json`` must be given the bodies (a changelog stores each body once)."""
        return jsonbytes.dumps(
            {
                "session_id": self.session_id,
                "last_seen": self.last_seen,
                "pending": [[p.identity, p.sequence, p.message] for p in self.pending],
                "turns": [
                    [
                        t.body if bodies else key,
                        t.reach,
                        t.emitted_at,
                        [d.json() for d in t.decisions],
                        t.revision,
                    ]
                    for key, t in self.turns.items()
                ],
                "waiting": [d.json() for d in self.waiting],
                # Sorted: a set's order depends on its history, and equal states should
                # give equal bytes.
                "seen_messages": sorted(self.seen_messages),
                "applied": self.applied,
            }
        )

    @staticmethod
    def due_inputs(data: bytes) -> tuple[float, float | None]:
        """``last_seen`` and the oldest turn's emission instant of a state as ``to_json``
        wrote it (with or without bodies), without building the state."""
        doc = orjson.loads(data)
        turns = doc["turns"]
        return doc["last_seen"], (turns[0][2] if turns else None)

    @classmethod
    def from_json(
        cls, data: bytes, bodies: Callable[[str], dict[str, Any] | None] | None = None
    ) -> SessionState:
        """``bodies`` gives a turn's body by its key, for JSON written without them; a turn
        whose body it cannot give (None) is left out: it can no longer be revised."""
        doc = orjson.loads(data)
        turns = {}
        for body, reach, at, decisions, *revision in doc["turns"]:
            if bodies is not None:
                body = bodies(body)
                if body is None:
                    continue
            # State written before turns were numbered has no revision: count on from 1.
            turns[body["inference_call_id"]] = EmittedTurn(
                body, reach, at, [_load_decision(d) for d in decisions], *revision[:1]
            )
        return cls(
            session_id=doc["session_id"],
            last_seen=doc["last_seen"],
            pending=[PendingMessage(i, s, m) for i, s, m in doc["pending"]],
            turns=turns,
            waiting=[_load_decision(d) for d in doc["waiting"]],
            seen_messages=set(doc["seen_messages"]),
            applied=doc["applied"],
        )


def _load_decision(doc: list[Any]) -> StoredDecision:
    decision, instant, origin = doc
    return StoredDecision(decision, (instant, decision["decision_id"]), Origin(*origin))

"""Natural keys that collapse redelivered decisions (SPEC §3), and the table that holds them.

A producer may resend a decision with a regenerated ``decision_id`` and a new
``captured_at``; what identifies the developer's act is the tuple below. Keys are hashed so
a session's collapse entries stay small however long the values are.

The collapse table maps (session id, key) to a copy of a decision (:func:`first_copy`: its
``decision_id`` and the record it came from). Three kinds of key, each read before a step
(``SessionDecision.collapse_keys``) and set after it (``CollapseWrites``):

- the **natural key**: the first copy of the act; a later copy is a counted duplicate;
- the **Codex sibling** (a ``codex`` decision with a ``call_id``): the first copy with a
  path, or, until one comes, the first pathless resend (:func:`resend`). A pathless copy
  is a duplicate once a copy with a path is there; a copy with a path that finds a pathless
  one replaces it, in whichever order they came (``core/assembler.py``);
- the **decision_id** (:func:`decision_key`): the first copy of the one act the id names in
  the session; the same marked :data:`CONFLICT` once a second act came under it (no copy of
  either joins a turn); or :data:`RELEASED` when its act turned out a Codex resend of another.

It is its own table, not part of a session's state, so a session's state does not grow with
every decision it ever collapsed; its entries go when their session expires.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import orjson

from stream_app.models.decision import DecisionDict
from stream_app.models.timestamps import instant_ns


def _digest(kind: str, parts: list[object]) -> str:
    return hashlib.blake2b(orjson.dumps([kind, *parts]), digest_size=16).hexdigest()


def natural_key(d: DecisionDict, file_path: str | None = None) -> str:
    """``file_path``: the path as it came, when ``d`` holds it redacted. Redaction changes
    what a path reads as, never which decisions are the same: two paths that redact alike
    stay two decisions. The key is a digest, so the path it was made of is never kept."""
    occurred = instant_ns(d["occurred_at"])
    if d["agent_harness"] == "claude-code" and d["call_id"] is not None:
        # A tool-use id is unique per row, so the file path is not part of the identity.
        return _digest(
            "tool-use",
            [
                d["org_id"],
                d["agent_harness"],
                d["session_id"],
                d["accepted"],
                d["explicit"],
                d["interaction_mode"],
                occurred,
                d["call_id"],
            ],
        )
    delay = d["observation_delay_ms"]
    return _digest(
        "edit",
        [
            d["org_id"],
            d["agent_harness"],
            d["session_id"],
            d["file_path"] if file_path is None else file_path,
            d["accepted"],
            d["explicit"],
            d["interaction_mode"],
            occurred,
            d["call_id"] if d["call_id"] is not None else "",
            delay if delay is not None else -1,
        ],
    )


def codex_sibling(d: DecisionDict) -> str | None:
    """Codex resends a decision without its file; this key pairs the resend with the original."""
    if d["agent_harness"] != "codex" or d["call_id"] is None:
        return None
    return _digest(
        "codex",
        [
            d["org_id"],
            d["session_id"],
            d["accepted"],
            d["explicit"],
            d["interaction_mode"],
            instant_ns(d["occurred_at"]),
            d["call_id"],
        ],
    )


def decision_key(decision_id: str) -> str:
    """The key under which the collapse holds the act a ``decision_id`` names."""
    return _digest("decision-id", [decision_id])


# A first copy is a JSON array: these values are not one. Each marker keeps the first copy
# it marks, so that record, read again after a worker stopped, still finds itself.
PATHLESS = "pathless:"  # a Codex sibling's value while a pathless resend holds it
CONFLICT = "conflict:"  # a decision_id's value once a second act came under it
RELEASED = "released"  # a decision_id's value once its act was found a resend: no act holds it


def resend(first: str) -> str:
    """The value of a Codex sibling key held by a pathless copy."""
    return PATHLESS + first


def conflicted(first: str) -> str:
    """The value of a decision_id whose first act (``first``) met a second one."""
    return CONFLICT + first


def first_copy(decision_id: str, source: tuple[str, int, int]) -> str:
    """What the collapse keeps of a decision's first copy: its ``decision_id`` and the record
    it was read from. A record that finds itself there is not a copy but the first one read
    again, after a worker stopped between writing the collapse and the session's state."""
    return orjson.dumps([decision_id, *source]).decode()


class Collapse(Protocol):
    """Where the first copy of each decision is remembered, per session."""

    def first(self, session_id: str, key: str) -> str | None:
        """The value held under this key (:func:`first_copy`, or a marker above), if any."""

    def remember(self, session_id: str, key: str, first: str) -> None:
        """Sets the key's value: the core asks only for the changes it means."""

    def forget(self, session_id: str) -> None:
        """Drops every entry of an expired session."""


# The value of each of a decision's keys, as the collapse held them before the step (None:
# nothing held): what the core reads of the collapse.
Firsts = Mapping[str, str | None]


@dataclass(slots=True)
class CollapseWrites:
    """What a step changes in the collapse, written by the shell after the step: the core
    reads the collapse only through the ``Firsts`` it is given, and never calls a store in
    the middle of a step."""

    forget: bool = False  # the session expired before the record: its entries go first
    remember: list[tuple[str, str]] = field(default_factory=list)  # (key, value), in order

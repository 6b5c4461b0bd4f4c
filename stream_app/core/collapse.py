"""Natural keys that collapse redelivered decisions (SPEC §3), and the table that holds them.

A producer may resend a decision with a regenerated ``decision_id`` and a new
``captured_at``; what identifies the developer's act is the tuple below. Keys are hashed so
a session's collapse entries stay small however long the values are.

The collapse table maps (session id, natural key) to the first copy's ``decision_id`` (and
the record it came from). It is
its own table, not part of a session's state, so a session's state does not grow with every
decision it ever collapsed; its entries go when their session expires.
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


def natural_key(d: DecisionDict) -> str:
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
            d["file_path"],
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


def first_copy(decision_id: str, source: tuple[str, int, int]) -> str:
    """What the collapse keeps of a decision's first copy: its ``decision_id`` and the record
    it was read from. A record that finds itself there is not a copy but the first one read
    again, after a worker stopped between writing the collapse and the session's state."""
    return orjson.dumps([decision_id, *source]).decode()


class Collapse(Protocol):
    """Where the first copy of each decision is remembered, per session."""

    def first(self, session_id: str, key: str) -> str | None:
        """The first copy with this natural key (:func:`first_copy`), if one came."""

    def remember(self, session_id: str, key: str, first: str) -> None: ...

    def forget(self, session_id: str) -> None:
        """Drops every entry of an expired session."""


# The first copy of each of a decision's natural keys, as the collapse held them before the
# step (None: no copy came): what the core reads of the collapse.
Firsts = Mapping[str, str | None]


@dataclass(slots=True)
class CollapseWrites:
    """What a step changes in the collapse, written by the shell after the step: the core
    reads the collapse only through the ``Firsts`` it is given, and never calls a store in
    the middle of a step."""

    forget: bool = False  # the session expired before the record: its entries go first
    remember: list[tuple[str, str]] = field(default_factory=list)  # (natural key, first)

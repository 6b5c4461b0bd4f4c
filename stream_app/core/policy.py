"""The knobs the core obeys, fixed for a deployment."""

from __future__ import annotations

from dataclasses import dataclass

from stream_app.core.tenant import normalize_org


@dataclass(frozen=True, slots=True)
class Policy:
    org_id: str  # normalized on construction
    max_record_bytes: int = 1024 * 1024
    session_ttl_seconds: float = 24 * 3600.0
    late_decision_window_seconds: float = 6 * 3600.0
    # A Turn's JSON past this is a `turn_too_large` dead letter: what Kafka's default
    # message limit lets a consumer read, whatever the producer's compression made of it.
    max_turn_bytes: int = 1024 * 1024
    # Basic redaction of messages' text, tool arguments and tool results, as of ``raw``:
    # off by default, since the contract redacts ``raw`` only and content is the dataset.
    redact_content: bool = False
    # Per session (SPEC §6; each is a STREAM_APP_* setting, docs/operations.md). A record
    # that would cross one is a `session_limit` dead letter and the session goes on; the
    # two that a turn's emission crosses drop the oldest instead (see each).
    max_key_bytes: int = 4096  # a record's key: it travels into dead letters and state
    max_pending_messages: int = 1000  # messages waiting for their turn; a finish always enters
    max_pending_bytes: int = 8 * 1024 * 1024  # their JSON, as translated
    max_waiting_decisions: int = 1000  # decisions waiting for their turn
    max_turn_decisions: int = 256  # decisions joined to one turn
    # Open turns (still open to late decisions), by count and by their Turn JSON: a new turn
    # past either closes the oldest early (counted `turns_closed_early`).
    max_open_turns: int = 1000
    max_open_turn_bytes: int = 64 * 1024 * 1024
    # Identities of emitted messages, kept to recognise a redelivery: past this the oldest
    # are forgotten (counted), and a copy of a forgotten message is taken for a new one.
    max_remembered_identities: int = 10_000
    # Turn keys that went final, per partition (not per session: a session that expired is
    # gone while its keys are still remembered), each for at least ``final_keys_horizon``:
    # past this the oldest are forgotten early (counted). A finishing message for a key
    # still remembered is a counted duplicate, never a second, different final record.
    max_final_keys: int = 1_000_000

    def __post_init__(self) -> None:
        object.__setattr__(self, "org_id", normalize_org(self.org_id))

    @property
    def final_keys_horizon(self) -> float:
        """How long a key that went final is remembered at least: a session's transcript
        published again after the session expired (its TTL) still finds every turn it had,
        the last of which may have gone final a window after its emission."""
        return self.session_ttl_seconds + self.late_decision_window_seconds

    @property
    def max_state_record_bytes(self) -> int:
        """The largest changelog record the limits let a state write: a stored decision
        (its record twice: as decided and as the record a later dead letter carries, plus
        the key), a pending message (at most a record once translated), a turn body (at
        most a turn), plus room for the entry's own fields. The producer's request limit is
        set from it (``app.py``), and a state record past it is never sent
        (``state/sessions.py``)."""
        largest = max(2 * self.max_record_bytes + self.max_key_bytes, self.max_turn_bytes)
        return largest + 64 * 1024

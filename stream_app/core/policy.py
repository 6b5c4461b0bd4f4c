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

    def __post_init__(self) -> None:
        object.__setattr__(self, "org_id", normalize_org(self.org_id))

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

    def __post_init__(self) -> None:
        object.__setattr__(self, "org_id", normalize_org(self.org_id))

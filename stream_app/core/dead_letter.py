"""Building dead-letter values (SPEC §6)."""

from __future__ import annotations

import base64
from typing import Any

from stream_app.core.records import Origin, Outputs
from stream_app.models.dead_letter import Reason
from stream_app.models.timestamps import format_utc


def dead_letter(origin: Origin, reason: Reason, error: str, now: float) -> dict[str, Any]:
    return {
        "source_topic": origin.source_topic,
        "partition": origin.partition,
        "offset": origin.offset,
        "key": origin.key,
        "value": origin.value,
        "encoding": origin.encoding,
        "reason": reason.value,
        "error": error,
        "dead_lettered_at": format_utc(now),
    }


def rejected(origin: Origin, reason: Reason, error: str, now: float) -> Outputs:
    """The outputs of a record that ends as a dead letter."""
    out = Outputs(outcome="dead_lettered")
    out.dead_letters.append(dead_letter(origin, reason, error, now))
    out.counts[f"dead_letter:{reason.value}"] += 1
    return out


def original_key(letter: dict[str, Any]) -> bytes | None:
    """The source record's key bytes: a dead letter keeps the key it came with."""
    key = letter["key"]
    if key is None:
        return None
    return base64.b64decode(key) if letter["encoding"] == "base64" else str(key).encode()

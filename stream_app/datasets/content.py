"""What a turn's content becomes in a dataset: credentials redacted, instants in RFC 3339 UTC."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import cast

import orjson

from stream_app.core.redaction import REDACTED, redact
from stream_app.datasets.skips import Skips
from stream_app.models.json_types import Json
from stream_app.models.turn import InferenceMessageDict, TurnDict


def redacted(turn: TurnDict, skips: Skips) -> TurnDict:
    """The turn with credentials in its messages cut out by the worker's redaction; counts
    the markers it added."""
    before = orjson.dumps(turn["new_messages"])
    messages = cast(list[InferenceMessageDict], redact(cast(Json, turn["new_messages"])))
    after = orjson.dumps(messages)
    if after == before:
        return turn
    marker = orjson.dumps(REDACTED)[1:-1]
    skips.redacted += after.count(marker) - before.count(marker)
    return {**turn, "new_messages": messages}


def rfc3339(instant: str | None) -> str | None:
    """An instant as RFC 3339 in UTC with microseconds: one spelling, one type in a loader."""
    if instant is None:
        return None
    try:
        parsed = datetime.fromisoformat(instant.replace("Z", "+00:00"))
    except ValueError:
        return instant
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def timestamped(turn: TurnDict) -> TurnDict:
    decisions = [
        {**d, "occurred_at": rfc3339(d["occurred_at"]), "captured_at": rfc3339(d["captured_at"])}
        for d in turn["decisions"]
    ]
    return cast(TurnDict, {**turn, "decisions": decisions})

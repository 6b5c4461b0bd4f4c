"""Decoding one source record (SPEC §2, §3, §6): everything that needs no session state.

A record leaves here either as a session-keyed input or as a dead letter naming the field
that was wrong; the state-bearing half of the pipeline never sees bad input. What every kind
shares is here (the size, the JSON, the key); what its value must be is its kind's decoder
(``core/inputs.py``, ``core/decoders.py``).
"""

from __future__ import annotations

import orjson
from pydantic import ValidationError

from stream_app.core.dead_letter import rejected
from stream_app.core.decoders import InputRejected
from stream_app.core.fields import describe
from stream_app.core.inputs import INPUTS
from stream_app.core.limits import LimitExceeded, check_depth, shallow, too_deep
from stream_app.core.policy import Policy
from stream_app.core.records import Origin, Outputs, SessionInput, SourceRecord
from stream_app.models.dead_letter import Reason
from stream_app.models.json_types import Json


def _value(record: SourceRecord, policy: Policy) -> bytes:
    if record.value is None:
        raise InputRejected(Reason.INVALID_JSON, "record has no value (a tombstone)")
    if len(record.value) > policy.max_record_bytes:
        raise InputRejected(
            Reason.TOO_LARGE,
            f"value is {len(record.value)} bytes, over the {policy.max_record_bytes}-byte limit",
        )
    return record.value


def _parse(value: bytes) -> Json:
    try:
        doc: Json = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):  # orjson's own, at 1024 levels
            raise too_deep("(record)") from None
        raise InputRejected(Reason.INVALID_JSON, f"value is not JSON: {exc}") from None
    check_depth(doc, value)
    return doc


def decode(
    record: SourceRecord, policy: Policy, now: float, parsed: Json | None = None
) -> tuple[SessionInput | None, Outputs]:
    """A session input, or ``None`` and the dead letter that took the record's place.
    ``parsed``: the record's value as orjson parsed it already, if it was (replay parses
    its lines whole); it is taken when no nesting limit can be near, else the value is
    parsed again so that a too-deep record is reported as it always is."""
    out = Outputs()
    try:
        value = _value(record, policy)
        doc = parsed if parsed is not None and shallow(value) else _parse(value)
        item: SessionInput = INPUTS[record.kind].decode(doc, record, out.counts, policy)
        # A valid value under a key too long to keep (what is wrong with a value comes first).
        if record.key is not None and len(record.key) > policy.max_key_bytes:
            raise InputRejected(
                Reason.SESSION_LIMIT,
                f"key: is {len(record.key)} bytes, over the {policy.max_key_bytes}-byte "
                "limit for record keys",
            )
        return item, out
    except ValidationError as exc:
        return None, rejected(Origin.of(record), Reason.SCHEMA, describe(exc), now)
    except LimitExceeded as exc:
        return None, rejected(Origin.of(record), Reason.SCHEMA, str(exc), now)
    except InputRejected as exc:
        return None, rejected(Origin.of(record), exc.reason, exc.error, now)

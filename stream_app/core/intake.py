"""Decoding one source record (SPEC §2, §3, §6): everything that needs no session state.

A record leaves here either as a session-keyed input or as a dead letter naming the field
that was wrong; the state-bearing half of the pipeline never sees bad input.
"""

from __future__ import annotations

from collections import Counter
from typing import cast

import orjson
from pydantic import ValidationError

from stream_app.core import jsonbytes
from stream_app.core.collapse import codex_sibling, natural_key
from stream_app.core.counts import Count
from stream_app.core.dead_letter import rejected
from stream_app.core.limits import (
    LimitExceeded,
    check_depth,
    check_id,
    check_instant,
    check_int64,
    too_deep,
)
from stream_app.core.policy import Policy
from stream_app.core.records import (
    Origin,
    Outputs,
    SessionDecision,
    SessionInput,
    SessionMessage,
    SourceRecord,
)
from stream_app.core.redaction import redact
from stream_app.core.tenant import normalize_org
from stream_app.core.translate import (
    identity,
    inference_call_id,
    inference_message,
    redacted_event,
)
from stream_app.models.dead_letter import Reason
from stream_app.models.decision import DecisionDict, DecisionPayload
from stream_app.models.json_types import Json, JsonObject
from stream_app.models.message import LLMMessagePublishedEvent


class _Rejected(Exception):
    def __init__(self, reason: Reason, error: str) -> None:
        super().__init__(error)
        self.reason = reason
        self.error = error


def _describe(exc: ValidationError) -> str:
    """The first error, with the path of the field it is about."""
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in first["loc"]) or "(record)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {first['msg']}{more}"


def _parse(record: SourceRecord, policy: Policy) -> Json:
    if record.value is None:
        raise _Rejected(Reason.INVALID_JSON, "record has no value (a tombstone)")
    if len(record.value) > policy.max_record_bytes:
        raise _Rejected(
            Reason.TOO_LARGE,
            f"value is {len(record.value)} bytes, over the {policy.max_record_bytes}-byte limit",
        )
    try:
        doc: Json = orjson.loads(record.value)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):  # orjson's own, at 1024 levels
            raise too_deep("(record)") from None
        raise _Rejected(Reason.INVALID_JSON, f"value is not JSON: {exc}") from None
    check_depth(doc, record.value)
    return doc


def _bind_tenant(org_id: str | None, field: str, policy: Policy) -> None:
    if org_id is not None and normalize_org(org_id) != policy.org_id:
        raise _Rejected(
            Reason.TENANT_MISMATCH,
            f"{field} {org_id!r} is not this deployment's org {policy.org_id!r}",
        )


def _message(
    doc: Json, record: SourceRecord, counts: Counter[Count], policy: Policy
) -> SessionMessage:
    event = LLMMessagePublishedEvent.model_validate(doc)
    fields = cast(JsonObject, doc)  # the model took it: an object
    _check_event(event)
    _bind_tenant(event.orgId, "orgId", policy)
    message = event.message
    session = event.conversationId
    completes = message.role == "assistant" and bool(message.finishReason)
    translated = inference_message(message, counts, redact_content=policy.redact_content)
    size = len(orjson.dumps(translated))
    if size > policy.max_record_bytes:  # a message's tool calls can expand ~2.7 times
        raise _Rejected(
            Reason.TOO_LARGE,
            f"message: is {size} bytes once translated to an InferenceMessage, over the "
            f"{policy.max_record_bytes}-byte limit",
        )
    return SessionMessage(
        session_id=session,
        identity=identity(message),
        sequence=message.sequence,
        message=translated,
        inference_call_id=inference_call_id(session, message, fields["message"])
        if completes
        else None,
        size=size,
        # A later dead letter carries the record: with content redacted, redacted too.
        origin=Origin.of(record).with_value(jsonbytes.dumps(redacted_event(fields, translated)))
        if policy.redact_content
        else Origin.of(record),
        timestamp=record.timestamp,
    )


def _check_event(event: LLMMessagePublishedEvent) -> None:
    """The limits of ``stream_app.core.limits`` that the schema does not state."""
    check_id(event.conversationId, "conversationId")
    check_id(event.eventId, "eventId")
    message = event.message
    check_id(message.messageId, "message.messageId")
    check_int64(message.sequence, "message.sequence")
    for i, part in enumerate(message.content or ()):
        if part.toolResult is not None:
            check_id(part.toolResult.toolCallId, f"message.content.{i}.toolResult.toolCallId")
    for i, call in enumerate(message.toolCalls or ()):
        check_id(call.id, f"message.toolCalls.{i}.id")


def _check_decision(payload: DecisionPayload) -> None:
    for name in ("decision_id", "session_id", "call_id"):
        check_id(getattr(payload, name), name)
    check_int64(payload.observation_delay_ms, "observation_delay_ms")
    check_instant(payload.occurred_at, "occurred_at")
    check_instant(payload.captured_at, "captured_at")


def _decision(doc: Json, record: SourceRecord, policy: Policy) -> SessionDecision:
    payload = DecisionPayload.model_validate(doc)
    _check_decision(payload)
    _bind_tenant(payload.org_id, "org_id", policy)
    fields = cast(JsonObject, doc)  # the model took it: an object
    raw = redact(fields["raw"])
    decision: DecisionDict = {
        "decision_id": payload.decision_id,
        "org_id": policy.org_id,
        "session_id": payload.session_id,
        "user_id": payload.user_id,
        "agent_harness": payload.agent_harness,
        "file_path": payload.file_path,
        "accepted": payload.accepted,
        "explicit": payload.explicit,
        "interaction_mode": payload.interaction_mode,
        "commit_sha": payload.commit_sha,
        "call_id": payload.call_id,
        "edit_retention_score": payload.edit_retention_score,
        "observation_delay_ms": payload.observation_delay_ms,
        "occurred_at": payload.occurred_at,
        "captured_at": payload.captured_at,
        "raw": raw,
    }
    # The state keeps the record for a later dead letter; it must not keep a credential.
    origin = Origin.of(record).with_value(jsonbytes.dumps({**fields, "raw": raw}))
    return SessionDecision(
        session_id=payload.session_id,
        decision=decision,
        natural_key=natural_key(decision),
        codex_sibling=codex_sibling(decision),
        origin=origin,
        timestamp=record.timestamp,
    )


def decode(record: SourceRecord, policy: Policy, now: float) -> tuple[SessionInput | None, Outputs]:
    """A session input, or ``None`` and the dead letter that took the record's place."""
    out = Outputs()
    try:
        doc = _parse(record, policy)
        item: SessionInput
        if record.kind == "messages":
            item = _message(doc, record, out.counts, policy)
        else:
            item = _decision(doc, record, policy)
        # A valid value under a key too long to keep (what is wrong with a value comes first).
        if record.key is not None and len(record.key) > policy.max_key_bytes:
            raise _Rejected(
                Reason.SESSION_LIMIT,
                f"key: is {len(record.key)} bytes, over the {policy.max_key_bytes}-byte "
                "limit for record keys",
            )
        return item, out
    except ValidationError as exc:
        return None, rejected(Origin.of(record), Reason.SCHEMA, _describe(exc), now)
    except LimitExceeded as exc:
        return None, rejected(Origin.of(record), Reason.SCHEMA, str(exc), now)
    except _Rejected as exc:
        return None, rejected(Origin.of(record), exc.reason, exc.error, now)

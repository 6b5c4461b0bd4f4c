"""The decoders of the input kinds (``core/inputs.py``): a record's JSON to the core's
session input (SPEC §2, §3, §6), or the exception that makes it a dead letter.

Each kind's decoder tries its fast path first (the msgspec Structs of ``core/input_structs.py``),
which never changes what a record becomes, only how fast, and leaves anything it declines
to the pydantic models, which decide it and word its dead letter. The input a decoder makes
carries its record as a later dead letter will (``Origin``): a message's with its content
redacted when the deployment redacts content, a decision's with ``raw`` and ``file_path``
redacted.
"""

from __future__ import annotations

from collections import Counter
from typing import cast

import msgspec

from stream_app.core import input_structs, jsonbytes
from stream_app.core.collapse import codex_sibling, natural_key
from stream_app.core.counts import Count
from stream_app.core.inference_message import (
    MessageFields,
    derived_form,
    identity,
    inference_call_id,
    inference_message,
    redacted_event,
)
from stream_app.core.limits import (
    INT64_MAX,
    INT64_MIN,
    check_id,
    check_instant,
    check_int64,
    in_range,
)
from stream_app.core.policy import Policy
from stream_app.core.records import Origin, SessionDecision, SessionMessage, SourceRecord
from stream_app.core.redaction import redact, redact_text
from stream_app.core.tenant import normalize_org
from stream_app.models.dead_letter import Reason
from stream_app.models.decision import DecisionDict, DecisionPayload
from stream_app.models.json_types import Json, JsonObject
from stream_app.models.message import LLMMessagePublishedEvent, Role, role_of, sequence_of
from stream_app.models.timestamps import is_datetime


class InputRejected(Exception):
    """A record that becomes a dead letter of ``reason``, ``error`` naming the field."""

    def __init__(self, reason: Reason, error: str) -> None:
        super().__init__(error)
        self.reason = reason
        self.error = error


def _bind_tenant(org_id: str | None, field: str, policy: Policy) -> None:
    if org_id is not None and normalize_org(org_id) != policy.org_id:
        raise InputRejected(
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
    return _session_message(
        event.conversationId,
        message,
        message.role,
        message.sequence,
        fields,
        record,
        counts,
        policy,
    )


def _fast_message(
    doc: Json, record: SourceRecord, counts: Counter[Count], policy: Policy
) -> SessionMessage | None:
    """The message, when the Struct takes the document and every rule the models keep in
    Python holds (``core/input_structs.py``); None leaves it to ``_message``, which decides it as it
    always has. Nothing is counted before the last None."""
    try:
        event = msgspec.convert(doc, input_structs.EventStruct)
    except msgspec.ValidationError:
        return None
    message = event.message
    role = role_of(message.role)
    if role is None:
        return None
    try:
        sequence = sequence_of(message.sequence)
    except ValueError:
        return None
    if sequence is not None and not INT64_MIN <= sequence <= INT64_MAX:
        return None
    content, calls = message.content, message.toolCalls
    if not content and not calls:
        return None
    for part in content or ():
        if (part.text is not None) + (part.reasoning is not None) + (
            part.toolResult is not None
        ) > 1:
            return None
    if event.publishedAt is not None and not is_datetime(event.publishedAt):
        return None
    if event.orgId is not None and normalize_org(event.orgId) != policy.org_id:
        return None
    fields = cast(JsonObject, doc)  # the Struct took it: an object
    return _session_message(
        event.conversationId, message, role, sequence, fields, record, counts, policy
    )


def _session_message(
    session: str,
    message: MessageFields,
    role: Role,
    sequence: int | None,
    fields: JsonObject,
    record: SourceRecord,
    counts: Counter[Count],
    policy: Policy,
) -> SessionMessage:
    """A checked message as the core keeps it; ``fields``: the event as it came."""
    message_id = message.messageId
    completes = role == "assistant" and bool(message.finishReason)
    if completes and message_id and derived_form(session, message_id):
        raise InputRejected(
            Reason.SCHEMA,
            f"message.messageId: {message_id!r} has the form of the inference_call_id this "
            "processor derives for a finishing message without a messageId "
            "(<conversationId>:seq:<sequence> or <conversationId>:sha256:<16 hex>), so its "
            "turn could take another message's key; send the message's own id, or none",
        )
    translated = inference_message(message, role, counts, redact_content=policy.redact_content)
    json = jsonbytes.dumps(translated)
    size = len(json)
    if size > policy.max_record_bytes:  # a message's tool calls can expand ~2.7 times
        raise InputRejected(
            Reason.TOO_LARGE,
            f"message: is {size} bytes once translated to an InferenceMessage, over the "
            f"{policy.max_record_bytes}-byte limit",
        )
    return SessionMessage(
        session_id=session,
        identity=identity(message_id, sequence),
        sequence=sequence,
        message=translated,
        inference_call_id=inference_call_id(session, message_id, sequence, fields["message"])
        if completes
        else None,
        size=size,
        # A later dead letter carries the record: with content redacted, redacted too.
        origin=Origin.of(record, jsonbytes.dumps(redacted_event(fields, translated)))
        if policy.redact_content
        else Origin.of(record),
        timestamp=record.timestamp,
        json=json,
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
    return _session_decision(payload, payload.observation_delay_ms, fields, record, policy)


def _fast_decision(doc: Json, record: SourceRecord, policy: Policy) -> SessionDecision | None:
    """The decision, when the Struct takes the document and the rules the models keep in
    Python hold (``core/input_structs.py``); None leaves it to ``_decision``."""
    try:
        payload = msgspec.convert(doc, input_structs.DecisionStruct)
    except msgspec.ValidationError:
        return None
    delay = payload.observation_delay_ms
    if isinstance(delay, float):
        if not delay.is_integer() or delay < 0:
            return None
        delay = int(delay)
    if delay is not None and delay > INT64_MAX:
        return None
    occurred, captured = payload.occurred_at, payload.captured_at
    if not in_range(occurred) or (captured is not None and not in_range(captured)):
        return None
    if payload.org_id is not None and normalize_org(payload.org_id) != policy.org_id:
        return None
    return _session_decision(payload, delay, cast(JsonObject, doc), record, policy)


def _session_decision(
    payload: DecisionPayload | input_structs.DecisionStruct,
    delay: int | None,
    fields: JsonObject,
    record: SourceRecord,
    policy: Policy,
) -> SessionDecision:
    """A checked decision as the core keeps it: bound to the tenant, ``raw`` redacted, and
    ``file_path`` too (no credential in a path reaches state, the collapse table or a Turn;
    a path without one is kept as it came). The natural key is made of the path as it came,
    so that paths that redact alike stay distinct decisions; it is a digest, and keeps none."""
    raw = redact(cast(JsonObject, fields["raw"]))  # the schema checked it is an object
    file_path = redact_text(payload.file_path)
    decision: DecisionDict = {
        "decision_id": payload.decision_id,
        "org_id": policy.org_id,
        "session_id": payload.session_id,
        "user_id": payload.user_id,
        "agent_harness": payload.agent_harness,
        "file_path": file_path,
        "accepted": payload.accepted,
        "explicit": payload.explicit,
        "interaction_mode": payload.interaction_mode,
        "commit_sha": payload.commit_sha,
        "call_id": payload.call_id,
        "edit_retention_score": payload.edit_retention_score,
        "observation_delay_ms": delay,
        "occurred_at": payload.occurred_at,
        "captured_at": payload.captured_at,
        "raw": raw,
    }
    # The state keeps the record for a later dead letter; it must not keep a credential.
    origin = Origin.of(record, jsonbytes.dumps({**fields, "raw": raw, "file_path": file_path}))
    return SessionDecision(
        session_id=payload.session_id,
        decision=decision,
        natural_key=natural_key(decision, payload.file_path),
        codex_sibling=codex_sibling(decision),
        origin=origin,
        timestamp=record.timestamp,
    )


def decode_message(
    doc: Json, record: SourceRecord, counts: Counter[Count], policy: Policy
) -> SessionMessage:
    """A chat message (``LLMMessagePublishedEvent``) as the core keeps it."""
    return _fast_message(doc, record, counts, policy) or _message(doc, record, counts, policy)


def decode_decision(
    doc: Json, record: SourceRecord, counts: Counter[Count], policy: Policy
) -> SessionDecision:
    """A developer's decision (``DeveloperDecision``) as the core keeps it."""
    return _fast_decision(doc, record, policy) or _decision(doc, record, policy)

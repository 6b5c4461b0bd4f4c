"""Log records as the agents emit them, built with ``opentelemetry-proto``: Claude Code's,
Codex's and Copilot Chat's decision events and their neighbours (docs/records.md, "Agents'
telemetry")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

Attr = str | bool | int | float | list["Attr"] | dict[str, "Attr"] | bytes
T0 = 1_796_000_000_000_000_000  # 2026-11-30T00:53:20Z, in nanoseconds


def any_value(value: Attr) -> AnyValue:
    out = AnyValue()
    if isinstance(value, bool):
        out.bool_value = value
    elif isinstance(value, int):
        out.int_value = value
    elif isinstance(value, float):
        out.double_value = value
    elif isinstance(value, str):
        out.string_value = value
    elif isinstance(value, bytes):
        out.bytes_value = value
    elif isinstance(value, list):
        out.array_value.values.extend(any_value(v) for v in value)
    else:
        out.kvlist_value.values.extend(key_values(value))
    return out


def key_values(attributes: Mapping[str, Attr]) -> list[KeyValue]:
    return [KeyValue(key=k, value=any_value(v)) for k, v in attributes.items()]


def log_record(
    attributes: Mapping[str, Attr],
    *,
    body: str | None = None,
    time: int = T0,
    observed: int = T0,
    event_name: str = "",
) -> LogRecord:
    record = LogRecord(time_unix_nano=time, observed_time_unix_nano=observed, event_name=event_name)
    record.attributes.extend(key_values(attributes))
    if body is not None:
        record.body.string_value = body
    return record


def request(
    records: Iterable[LogRecord],
    resource: Mapping[str, Attr] | None = None,
    scope: str = "com.example.agent",
) -> ExportLogsServiceRequest:
    out = ExportLogsServiceRequest()
    resource_logs = out.resource_logs.add()
    resource_logs.resource.attributes.extend(key_values(resource or {}))
    scope_logs = resource_logs.scope_logs.add()
    scope_logs.scope.name = scope
    scope_logs.log_records.extend(records)
    return out


CLAUDE_RESOURCE: dict[str, Attr] = {"service.name": "claude-code", "service.version": "2.1.0"}
CODEX_RESOURCE: dict[str, Attr] = {"service.name": "codex_cli_rs"}


def claude_code(
    session: str = "sess-cc",
    tool_use_id: str = "toolu_01",
    decision: str = "accept",
    source: str = "user_temporary",
    *,
    sequence: int = 1,
    timestamp: str = "2026-11-30T01:33:20.125Z",
    extra: Mapping[str, Attr] | None = None,
) -> LogRecord:
    attributes: dict[str, Attr] = {
        "session.id": session,
        "user.id": "device-1",
        "user.account_uuid": "acct-1",
        "organization.id": "org-uuid",
        "event.name": "tool_decision",
        "event.timestamp": timestamp,
        "event.sequence": sequence,
        "prompt.id": "prompt-1",
        "tool_name": "Edit",
        "tool_use_id": tool_use_id,
        "decision": decision,
        "source": source,
    }
    attributes.update(extra or {})
    return log_record(attributes, body="claude_code.tool_decision")


def claude_api_request(session: str = "sess-cc") -> LogRecord:
    return log_record(
        {"session.id": session, "event.name": "api_request", "model": "claude-x", "cost_usd": 0.01},
        body="claude_code.api_request",
    )


def codex(
    conversation: str = "conv-1",
    call_id: str = "call_1",
    decision: str = "approved",
    source: str = "user",
    *,
    time: int = 0,
    observed: int = T0 + 5_000_000,
    timestamp: str | None = None,
) -> LogRecord:
    attributes: dict[str, Attr] = {
        "event.name": "codex.tool_decision",
        "conversation.id": conversation,
        "tool_name": "apply_patch",
        "call_id": call_id,
        "decision": decision,
        "source": source,
    }
    if timestamp is not None:
        attributes["event.timestamp"] = timestamp
    return log_record(attributes, time=time, observed=observed)


def codex_api_request(conversation: str = "conv-1") -> LogRecord:
    return log_record({"event.name": "codex.api_request", "conversation.id": conversation})


def copilot_feedback(request_id: str = "req-1", outcome: str = "accepted") -> LogRecord:
    return log_record(
        {
            "event.name": "copilot_chat.edit.feedback",
            "outcome": outcome,
            "request_id": request_id,
            "copilot_chat.file.relative_path": "src/app.py",
            "language_id": "python",
        }
    )


def copilot_inline(request_id: str = "req-2", accepted: Attr = True) -> LogRecord:
    return log_record(
        {"event.name": "copilot_chat.inline.done", "accepted": accepted, "request_id": request_id}
    )


def copilot_survival(
    request_id: str = "req-1", rate: float = 0.75, delay_ms: int = 30_000
) -> LogRecord:
    return log_record(
        {
            "event.name": "copilot_chat.edit.survival",
            "request_id": request_id,
            "survival_rate_four_gram": rate,
            "survival_rate_no_revert": 1.0,
            "time_delay_ms": delay_ms,
            "copilot_chat.file.relative_path": "src/app.py",
        }
    )


COPILOT_RESOURCE: dict[str, Attr] = {"service.name": "copilot-chat", "session.id": "win-1"}

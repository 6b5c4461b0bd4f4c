"""The agents' OpenTelemetry log records as DeveloperDecisions (SPEC §10, docs/records.md
"Agents' telemetry").

One ``ExportLogsServiceRequest`` in, one outcome per log record out, in order, none left
out:

- :class:`Translated`: a decision event that became a DeveloperDecision, as the decisions
  topic takes it (keyed by its session): it has passed the worker's own intake
  (``core/intake.decode``), so it never becomes a dead letter there;
- :class:`Ignored`: not a decision event (``api_request``, ``user_prompt`` and the like:
  normal), counted by its event name;
- :class:`Untranslatable`: a decision event that cannot become a decision (no session id,
  an unknown verdict, no time, a value the contract refuses): an
  ``untranslatable_telemetry`` dead letter carrying the log record alone, as a one-record
  request in OTLP JSON.

A value that is not a request at all raises :class:`~stream_app.ingest.otlp.InvalidOtlp`
(``invalid_otlp``). Each log record is translated by itself, from itself and its resource:
how records are split into requests changes nothing, and a record exported twice gives the
same decision, ``decision_id`` included (a digest of the record), which the collapse takes
for the redelivery it is.

Pure like ``core/``: no Kafka, no Faust, no clock.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import NamedTuple

import orjson
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs

from stream_app.core.dead_letter import rejected
from stream_app.core.inputs import DECISIONS
from stream_app.core.intake import decode as intake_decode
from stream_app.core.policy import Policy
from stream_app.core.records import Origin, Outputs, SessionDecision, SourceRecord
from stream_app.ingest import otlp
from stream_app.models.dead_letter import Reason
from stream_app.models.decision import AgentHarness, InteractionMode
from stream_app.models.json_types import JsonObject
from stream_app.models.timestamps import is_datetime

# The dead-letter reasons of SPEC §10.
UNTRANSLATABLE = Reason.UNTRANSLATABLE_TELEMETRY
INVALID_OTLP = Reason.INVALID_OTLP

# The decision events, by the full name each agent gives it (docs/records.md has a table
# per agent). Claude Code names the event ``tool_decision`` in ``event.name`` and in full
# in the body; the others in ``event.name`` (or the log record's ``event_name``).
CLAUDE_CODE = "claude_code.tool_decision"
CODEX = "codex.tool_decision"
COPILOT_FEEDBACK = "copilot_chat.edit.feedback"
COPILOT_INLINE = "copilot_chat.inline.done"
COPILOT_SURVIVAL = "copilot_chat.edit.survival"
HARNESS: dict[str, AgentHarness] = {
    CLAUDE_CODE: "claude-code",
    CODEX: "codex",
    COPILOT_FEEDBACK: "copilot",
    COPILOT_INLINE: "copilot",
    COPILOT_SURVIVAL: "copilot",
}
# Claude Code's short name, when its body does not give the full one.
_CLAUDE_SHORT = "tool_decision"
_CLAUDE_SERVICE = "claude-code"
MAX_EVENT_NAME = 128  # an ignored event's name as counted: longer ones are cut
UNNAMED = "(unnamed)"  # the name counted for a log record that names no event

# Verdicts: a value in neither set is an unknown verdict (a dead letter).
_CLAUDE_VERDICTS = {"accept": True, "reject": False}
_CODEX_VERDICTS = {"approved": True, "approved_for_session": True, "denied": False, "abort": False}
_COPILOT_OUTCOMES = {"accepted": True, "rejected": False}
_BOOLEAN_TEXT = {"true": True, "false": False}

_Attributes = Mapping[
    str, AnyValue
]  # a record's or a resource's, by key (the last of a repeated key)

# Where each agent puts the session id, in order (the log record's attributes first, then
# its resource's), the user, the call, the file.
_SESSION_KEYS: dict[AgentHarness, tuple[str, ...]] = {
    "claude-code": ("session.id",),
    "codex": ("conversation.id", "session.id"),
    "copilot": ("session.id",),
    "pi": (),
}
_USER_KEYS = ("user.account_uuid", "user.account_id", "user.id")
_CALL_KEYS: dict[AgentHarness, str] = {
    "claude-code": "tool_use_id",
    "codex": "call_id",
    "copilot": "request_id",
    "pi": "",
}
_COPILOT_PATH = "copilot_chat.file.relative_path"
_CLAUDE_PATH_PARAMETERS = ("file_path", "notebook_path")
_SURVIVAL_SCORES = ("survival_rate_four_gram", "survival_rate_no_revert")
_SURVIVAL_DELAY = "time_delay_ms"
# Past these sizes a value is decoded in a thread: decoding holds the event loop for longer
# than a slice (``runtime/slices.py``, 1 ms) otherwise. OTLP JSON costs some 240 µs a KiB
# (``json_format`` is Python), protobuf some 5 µs (this 2-core machine's figures).
INLINE_DECODE_BYTES: dict[otlp.Encoding, int] = {"otlp_json": 4 * 1024, "otlp_proto": 256 * 1024}


class Translated(NamedTuple):
    """A decision event made a DeveloperDecision: ``value`` its JSON for the decisions
    topic, keyed by ``session_id``."""

    harness: AgentHarness
    event: str
    session_id: str
    decision: JsonObject
    value: bytes


class Ignored(NamedTuple):
    """A log record that is not a decision event, by its event name."""

    event: str


class Untranslatable(NamedTuple):
    """A decision event that cannot become a decision: ``record`` is the log record alone,
    with its resource and scope, as a one-record request in OTLP JSON."""

    event: str
    error: str
    record: bytes


Outcome = Translated | Ignored | Untranslatable


@dataclass(slots=True)
class Translation:
    """Every log record of a request, in order, with the counts the metrics take."""

    outcomes: list[Outcome] = field(default_factory=list)
    translated: Counter[str] = field(default_factory=Counter)  # by harness
    ignored: Counter[str] = field(default_factory=Counter)  # by event name
    untranslatable: Counter[str] = field(default_factory=Counter)  # by event name

    @property
    def decisions(self) -> list[Translated]:
        return [o for o in self.outcomes if isinstance(o, Translated)]

    def add(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)
        if isinstance(outcome, Translated):
            self.translated[outcome.harness] += 1
        elif isinstance(outcome, Ignored):
            self.ignored[outcome.event] += 1
        else:
            self.untranslatable[outcome.event] += 1


class _Refused(Exception):
    """A decision event that cannot become a decision; the message names the attribute."""


def translate_value(
    value: bytes, policy: Policy, encoding: otlp.Encoding | None = None
) -> Translation:
    """A telemetry record's value translated; raises ``InvalidOtlp`` when it is no request."""
    return translate(otlp.decode(value, encoding), policy)


def translate(request: ExportLogsServiceRequest, policy: Policy) -> Translation:
    """Each log record of ``request``, in order (see the module's docstring)."""
    out = Translation()
    for outcome in outcomes(request, policy):
        out.add(outcome)
    return out


def outcomes(request: ExportLogsServiceRequest, policy: Policy) -> Iterator[Outcome]:
    """Each log record's outcome, one at a time, in order."""
    for resource_logs in request.resource_logs:
        resource = otlp.attribute_map(resource_logs.resource.attributes)
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                yield _outcome(resource_logs, scope_logs, record, resource, policy)


class Step(NamedTuple):
    """A telemetry record's work: its translation, and ``out``, the dead letters of the log
    records it could not translate (or of the record, when it is no request), counted."""

    translation: Translation
    out: Outputs


def step(record: SourceRecord, policy: Policy, now: float) -> Step:
    """A telemetry topic's record (or a replay line's) translated, and its dead letters: an
    ``untranslatable_telemetry`` one per log record that could not be, carrying that record
    alone; one ``invalid_otlp`` for a value that is no request. Never raises."""
    work = stepping(record, policy, now)
    while True:
        try:
            next(work)
        except StopIteration as done:
            result: Step = done.value
            return result


def decodes_in_thread(value: bytes | None, encoding: otlp.Encoding | None = None) -> bool:
    """Whether decoding ``value`` would hold the event loop past a slice, so that it is
    decoded in a thread (the receiver's body, the worker's telemetry record). The thread
    shares the GIL: ``json_format``'s Python gives it back to the loop each switch interval
    (5 ms), where decoding on the loop held it for the whole value (0.25 s a MiB of JSON)."""
    if value is None:
        return False
    return len(value) > INLINE_DECODE_BYTES[encoding or otlp.encoding_of(value)]


def decoded(record: SourceRecord, now: float) -> ExportLogsServiceRequest | Step:
    """A telemetry record's request, or the step of a record that is none (its one
    ``invalid_otlp`` dead letter): :func:`stepping`'s first unit, which the worker's agent
    runs in a thread for a large value (:func:`decodes_in_thread`). Never raises."""
    if record.value is None:
        out = rejected(Origin.of(record), INVALID_OTLP, "no value (a tombstone)", now)
        return Step(Translation(), out)
    try:
        return otlp.decode(record.value)
    except otlp.InvalidOtlp as exc:
        return Step(Translation(), rejected(Origin.of(record), INVALID_OTLP, str(exc), now))


def stepping(
    record: SourceRecord,
    policy: Policy,
    now: float,
    request: ExportLogsServiceRequest | Step | None = None,
) -> Generator[None, None, Step]:
    """:func:`step` a unit of work at a time: it yields once the value is decoded and after
    each log record, and returns the step. A 1 MiB record holds some 5,000 log records (tens
    of µs each): the worker's agent gives the event loop back between two units when its
    slice is used up (``runtime/slices.py``), where ``step`` would hold it for the whole
    record. ``request``: the value already :func:`decoded` (in a thread), else decoded here."""
    if request is None:
        request = decoded(record, now)
    if isinstance(request, Step):
        return request
    yield
    translation = Translation()
    for outcome in outcomes(request, policy):
        translation.add(outcome)
        yield
    out = Outputs()
    for outcome in translation.outcomes:
        if isinstance(outcome, Untranslatable):
            origin = Origin.of(record, outcome.record)
            error = f"{outcome.event}: {outcome.error}"
            out.extend(rejected(origin, UNTRANSLATABLE, error, now))
    return Step(translation, out)


def log_record_count(request: ExportLogsServiceRequest) -> int:
    return sum(len(scope.log_records) for rl in request.resource_logs for scope in rl.scope_logs)


def event_name(record: LogRecord, attributes: _Attributes, resource: _Attributes) -> str:
    """The event a log record reports: a decision event's full name when it is one, else
    the most telling name it has (its body's, as Claude Code writes ``claude_code.*``
    there, then ``event_name``, then ``event.name``), or :data:`UNNAMED`."""
    named = record.event_name
    attr = _text(attributes.get("event.name"))
    body = record.body.string_value if record.body.WhichOneof("value") == "string_value" else ""
    for name in (named, attr, body):
        if name in HARNESS:
            return name
    if _CLAUDE_SHORT in (named, attr) and (
        body.startswith("claude_code.") or _text(resource.get("service.name")) == _CLAUDE_SERVICE
    ):
        return CLAUDE_CODE
    if body and len(body) <= MAX_EVENT_NAME and "." in body and not any(c.isspace() for c in body):
        return body
    name = named or attr or UNNAMED
    return name[:MAX_EVENT_NAME]


def _outcome(
    resource_logs: ResourceLogs,
    scope_logs: ScopeLogs,
    record: LogRecord,
    resource: _Attributes,
    policy: Policy,
) -> Outcome:
    name = UNNAMED
    try:
        attributes = otlp.attribute_map(record.attributes)
        name = event_name(record, attributes, resource)
        harness = HARNESS.get(name)
        if harness is None:
            return Ignored(name)
        return _decision(name, harness, record, attributes, resource, policy)
    except _Refused as exc:
        return Untranslatable(name, str(exc), _alone(resource_logs, scope_logs, record))
    except Exception as exc:  # no log record stops the worker: it is a dead letter instead
        error = f"translation failed: {type(exc).__name__}: {exc}"[:500]
        return Untranslatable(name, error, _alone(resource_logs, scope_logs, record))


def _decision(
    name: str,
    harness: AgentHarness,
    record: LogRecord,
    attributes: _Attributes,
    resource: _Attributes,
    policy: Policy,
) -> Translated:
    session_id = _first(attributes, resource, _SESSION_KEYS[harness])
    if session_id is None:
        keys = " or ".join(_SESSION_KEYS[harness])
        raise _Refused(f"{keys}: missing (a decision joins its session's turns by it)")
    accepted, explicit, mode = _verdict(name, attributes)
    score: float | None = None
    delay: int | None = None
    if name == COPILOT_SURVIVAL:
        score, delay = _survival(attributes)
    decision: JsonObject = {
        "decision_id": _decision_id(harness, session_id, record),
        "org_id": policy.org_id,
        "session_id": session_id,
        "user_id": _first(attributes, resource, _USER_KEYS),
        "agent_harness": harness,
        "file_path": _file_path(harness, attributes),
        "accepted": accepted,
        "explicit": explicit,
        "interaction_mode": mode,
        "commit_sha": None,
        "call_id": _text(attributes.get(_CALL_KEYS[harness])) or None,
        "edit_retention_score": score,
        "observation_delay_ms": delay,
        "occurred_at": _occurred_at(record, attributes),
        "raw": otlp.attributes_json(record.attributes),
    }
    # The intake redacts ``raw`` as it checks the decision: its copy is the one sent.
    decision["raw"] = _checked_raw(orjson.dumps(decision), session_id, policy)
    return Translated(harness, name, session_id, decision, orjson.dumps(decision))


def _verdict(name: str, attributes: _Attributes) -> tuple[bool, bool, InteractionMode]:
    """``accepted``, ``explicit`` (a person's gesture) and the interaction mode."""
    if name == CLAUDE_CODE:
        accepted = _lookup(attributes, "decision", _CLAUDE_VERDICTS)
        source = _text(attributes.get("source"))
        return accepted, source.startswith("user_"), "agent"
    if name == CODEX:
        accepted = _lookup(attributes, "decision", _CODEX_VERDICTS)
        source = _text(attributes.get("source")).lower()
        return accepted, source == "user", "agent"
    if name == COPILOT_FEEDBACK:
        return _lookup(attributes, "outcome", _COPILOT_OUTCOMES), True, "agent"
    if name == COPILOT_INLINE:
        return _accepted_flag(attributes), True, "inline"
    # An edit's survival is observed on an edit that was applied: the score says how much
    # of it is still there, at the delay; nobody made a gesture.
    return True, False, "agent"


def _lookup(attributes: _Attributes, key: str, verdicts: dict[str, bool]) -> bool:
    given = _text(attributes.get(key))
    verdict = verdicts.get(given.lower())
    if verdict is None:
        known = ", ".join(verdicts)
        shown = repr(given[:80]) if given else "missing"
        raise _Refused(f"{key}: {shown} is not a known verdict ({known})")
    return verdict


def _accepted_flag(attributes: _Attributes) -> bool:
    value = attributes.get("accepted")
    if value is not None:
        kind = value.WhichOneof("value")
        if kind == "bool_value":
            return value.bool_value
        if kind == "string_value" and value.string_value.lower() in _BOOLEAN_TEXT:
            return _BOOLEAN_TEXT[value.string_value.lower()]
        if kind == "int_value" and value.int_value in (0, 1):
            return value.int_value == 1
    raise _Refused("accepted: missing or not a boolean (an unknown verdict)")


def _survival(attributes: _Attributes) -> tuple[float, int | None]:
    score: float | None = None
    for key in _SURVIVAL_SCORES:
        number = _number(attributes.get(key))
        if number is not None:
            if not 0.0 <= number <= 1.0:
                raise _Refused(f"{key}: {number} is not a rate in [0, 1]")
            score = float(number)
            break
    if score is None:
        raise _Refused(f"{' or '.join(_SURVIVAL_SCORES)}: missing (a survival needs its rate)")
    delay = _number(attributes.get(_SURVIVAL_DELAY))
    if delay is None:
        return score, None
    if delay < 0 or delay != int(delay):
        raise _Refused(f"{_SURVIVAL_DELAY}: {delay} is not a whole number of ms >= 0")
    return score, int(delay)


def _number(value: AnyValue | None) -> float | None:
    if value is None:
        return None
    kind = value.WhichOneof("value")
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        number = value.double_value
        return number if number == number and abs(number) != float("inf") else None
    if kind == "string_value":
        try:
            return float(value.string_value)
        except ValueError:
            return None
    return None


def _file_path(harness: AgentHarness, attributes: _Attributes) -> str:
    """The edited file, where the agent says it: Copilot in an attribute, Claude Code in
    ``tool_parameters`` (a JSON object, sent with ``OTEL_LOG_TOOL_DETAILS=1``); else ""."""
    if harness == "copilot":
        return _text(attributes.get(_COPILOT_PATH))
    if harness == "claude-code":
        parameters = _text(attributes.get("tool_parameters"))
        if parameters.startswith("{"):
            try:
                doc = orjson.loads(parameters)
            except orjson.JSONDecodeError:
                return ""
            if isinstance(doc, dict):
                for key in _CLAUDE_PATH_PARAMETERS:
                    path = doc.get(key)
                    if isinstance(path, str):
                        return path
    return ""


def _occurred_at(record: LogRecord, attributes: _Attributes) -> str:
    """The event's time: Claude Code's and Codex's ``event.timestamp`` when it is an RFC
    3339 date-time, else the record's time, else (a time of 0: Codex) its observed time."""
    stamped = _text(attributes.get("event.timestamp"))
    if stamped and is_datetime(stamped):
        return stamped
    nanos = record.time_unix_nano or record.observed_time_unix_nano
    if not nanos:
        raise _Refused("timeUnixNano, observedTimeUnixNano, event.timestamp: no time given")
    return _instant(nanos)


def _instant(nanos: int) -> str:
    seconds, fraction = divmod(nanos, 1_000_000_000)
    try:
        whole = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    except (OverflowError, OSError, ValueError):
        raise _Refused(f"timeUnixNano: {nanos} is not a representable instant") from None
    return f"{whole}.{fraction:09d}Z" if fraction else f"{whole}Z"


def _decision_id(harness: AgentHarness, session_id: str, record: LogRecord) -> str:
    """A digest of the log record (its protobuf form, deterministic: a record sent as JSON
    or as protobuf is the same record), its harness and session: the same record exported
    twice has the same id; two records never do. Not of the resource, which a Collector's
    processors may extend on the way."""
    digest = hashlib.sha256(harness.encode())
    digest.update(b"\0" + session_id.encode("utf-8", "surrogatepass") + b"\0")
    digest.update(record.SerializeToString(deterministic=True))
    return f"otlp-{digest.hexdigest()}"


def _checked_raw(value: bytes, session_id: str, policy: Policy) -> JsonObject:
    """The decision as the decisions topic will read it: the worker's intake must take it;
    its ``raw`` as the intake redacted it (Basic redaction, SPEC §3)."""
    record = SourceRecord(DECISIONS.name, "telemetry", 0, 0, session_id.encode(), value)
    item, outputs = intake_decode(record, policy, 0.0)
    if not isinstance(item, SessionDecision):
        letter = outputs.dead_letters[0] if outputs.dead_letters else None
        error = letter["error"] if letter is not None else "refused by intake"
        raise _Refused(f"the decision it makes is refused: {error}")
    return item.decision["raw"]


def _first(attributes: _Attributes, resource: _Attributes, keys: tuple[str, ...]) -> str | None:
    for where in (attributes, resource):
        for key in keys:
            text = _text(where.get(key))
            if text:
                return text
    return None


def _text(value: AnyValue | None) -> str:
    """A string attribute's text; an integer's digits; else ""."""
    if value is None:
        return ""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return str(value.int_value)
    return ""


def _alone(resource_logs: ResourceLogs, scope_logs: ScopeLogs, record: LogRecord) -> bytes:
    """One log record as a request of its own, in OTLP JSON: what its dead letter carries."""
    request = ExportLogsServiceRequest()
    resource = request.resource_logs.add()
    resource.resource.CopyFrom(resource_logs.resource)
    resource.schema_url = resource_logs.schema_url
    scope = resource.scope_logs.add()
    scope.scope.CopyFrom(scope_logs.scope)
    scope.schema_url = scope_logs.schema_url
    scope.log_records.add().CopyFrom(record)
    return otlp.encode_json(request)

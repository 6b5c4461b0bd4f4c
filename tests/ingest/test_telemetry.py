"""The translator of the agents' log records (SPEC §10): each agent's decision event
becomes the DeveloperDecision docs/records.md's tables say, every log record is accounted
for, and how records are split into requests or encoded changes nothing."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from stream_app.core.intake import decode as intake_decode
from stream_app.core.policy import Policy
from stream_app.core.records import SessionDecision, SourceRecord
from stream_app.ingest import otlp
from stream_app.ingest.telemetry import (
    Ignored,
    Translated,
    Untranslatable,
    log_record_count,
    translate,
    translate_value,
)
from stream_app.models.decision import DecisionPayload
from tests.ingest.otlp_records import (
    CLAUDE_RESOURCE,
    CODEX_RESOURCE,
    COPILOT_RESOURCE,
    T0,
    Attr,
    claude_api_request,
    claude_code,
    codex,
    codex_api_request,
    copilot_feedback,
    copilot_inline,
    copilot_survival,
    log_record,
    request,
)

POLICY = Policy(org_id="Acme")


def one(record: LogRecord, resource: Mapping[str, Attr] | None = None) -> Translated:
    [outcome] = translate(request([record], resource), POLICY).outcomes
    assert isinstance(outcome, Translated), outcome
    return outcome


def refused(record: LogRecord, resource: Mapping[str, Attr] | None = None) -> Untranslatable:
    [outcome] = translate(request([record], resource), POLICY).outcomes
    assert isinstance(outcome, Untranslatable), outcome
    return outcome


def test_claude_code_accept_by_a_person() -> None:
    out = one(claude_code(), CLAUDE_RESOURCE)
    d = out.decision
    assert out.harness == "claude-code" and out.session_id == "sess-cc"
    assert d["agent_harness"] == "claude-code"
    assert d["accepted"] is True and d["explicit"] is True
    assert d["call_id"] == "toolu_01"
    assert d["interaction_mode"] == "agent"
    assert d["occurred_at"] == "2026-11-30T01:33:20.125Z"
    assert d["org_id"] == "acme"
    assert d["user_id"] == "acct-1"
    assert d["file_path"] == ""
    assert d["edit_retention_score"] is None and d["observation_delay_ms"] is None
    raw = d["raw"]
    assert (
        isinstance(raw, dict) and raw["source"] == "user_temporary" and raw["event.sequence"] == 1
    )
    DecisionPayload.model_validate(orjson.loads(out.value))


class Harness(NamedTuple):
    """A harness's decision record, with the resource it is exported under, the session and
    call it names by default, and docs/records.md's table of it: its ``decision`` says
    ``accepted``, its ``source`` says ``explicit``, each whatever the other is."""

    record: Callable[..., LogRecord]
    resource: Mapping[str, Attr]
    session: str
    call_id: str
    accepted: dict[str, bool]
    explicit: dict[str, bool]


HARNESSES = {
    "claude-code": Harness(
        claude_code,
        CLAUDE_RESOURCE,
        "sess-cc",
        "toolu_01",
        {"accept": True, "reject": False},
        {
            "user_permanent": True,
            "user_temporary": True,
            "user_reject": True,
            "user_abort": True,
            "config": False,
            "hook": False,
        },
    ),
    "codex": Harness(
        codex,
        CODEX_RESOURCE,
        "conv-1",
        "call_1",
        {"approved": True, "approved_for_session": True, "denied": False, "abort": False},
        {"user": True, "User": True, "config": False, "Config": False},
    ),
}


@pytest.mark.parametrize(
    ("harness", "decision", "source"),
    [(name, d, s) for name, h in HARNESSES.items() for d in h.accepted for s in h.explicit],
)
def test_verdicts(harness: str, decision: str, source: str) -> None:
    h = HARNESSES[harness]
    out = one(h.record(decision=decision, source=source), h.resource)
    d = out.decision
    assert out.harness == harness and d["session_id"] == h.session and d["call_id"] == h.call_id
    assert (d["accepted"], d["explicit"]) == (h.accepted[decision], h.explicit[source])


def test_claude_code_file_from_tool_parameters_and_raw_redacted() -> None:
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    parameters = orjson.dumps({"file_path": "/repo/src/app.py", "new_string": f"TOKEN={secret}"})
    d = one(claude_code(extra={"tool_parameters": parameters.decode()})).decision
    assert d["file_path"] == "/repo/src/app.py"
    assert secret not in orjson.dumps(d).decode()
    assert "[REDACTED]" in orjson.dumps(d["raw"]).decode()


def test_claude_code_short_name_without_body_by_service() -> None:
    record = claude_code()
    record.ClearField("body")
    assert one(record, CLAUDE_RESOURCE).event == "claude_code.tool_decision"
    assert isinstance(translate(request([record]), POLICY).outcomes[0], Ignored)


def test_codex_time_zero_takes_the_observed_time() -> None:
    d = one(codex(time=0, observed=T0 + 5_000_000)).decision
    assert d["occurred_at"] == "2026-11-30T00:53:20.005000000Z"
    d = one(codex(time=T0, observed=T0 + 5_000_000)).decision
    assert d["occurred_at"] == "2026-11-30T00:53:20Z"
    d = one(codex(timestamp="2026-11-30T01:33:21.5Z")).decision
    assert d["occurred_at"] == "2026-11-30T01:33:21.5Z"


def test_copilot_feedback_inline_survival() -> None:
    feedback = one(copilot_feedback(outcome="rejected"), COPILOT_RESOURCE).decision
    assert feedback["agent_harness"] == "copilot" and feedback["session_id"] == "win-1"
    assert feedback["accepted"] is False and feedback["explicit"] is True
    assert feedback["call_id"] == "req-1" and feedback["file_path"] == "src/app.py"
    inline = one(copilot_inline(accepted="true"), COPILOT_RESOURCE).decision
    assert inline["accepted"] is True and inline["interaction_mode"] == "inline"
    assert inline["explicit"] is True
    survival = one(copilot_survival(rate=0.0, delay_ms=5000), COPILOT_RESOURCE).decision
    assert survival["accepted"] is True and survival["explicit"] is False
    assert survival["edit_retention_score"] == 0.0 and survival["observation_delay_ms"] == 5000
    assert survival["call_id"] == "req-1"


def test_every_translated_decision_passes_intake() -> None:
    records = [claude_code(), codex(), copilot_feedback(), copilot_inline(), copilot_survival()]
    for out in translate(request(records, COPILOT_RESOURCE | {"session.id": "s"}), POLICY).outcomes:
        assert isinstance(out, Translated)
        source = SourceRecord("decisions", "d", 0, 0, out.session_id.encode(), out.value)
        item, _ = intake_decode(source, POLICY, 0.0)
        assert isinstance(item, SessionDecision)
        assert item.session_id == out.session_id


def test_ignored_by_event_name() -> None:
    records = [
        claude_api_request(),
        codex_api_request(),
        log_record({"event.name": "copilot_chat.tool.call"}),
        log_record({}, body="a plain log line, not an event"),
        log_record({}, event_name="gen_ai.client.inference.operation.details"),
    ]
    names = [o.event for o in translate(request(records), POLICY).outcomes]
    assert names == [
        "claude_code.api_request",
        "codex.api_request",
        "copilot_chat.tool.call",
        "(unnamed)",
        "gen_ai.client.inference.operation.details",
    ]
    t = translate(request(records), POLICY)
    assert all(isinstance(o, Ignored) for o in t.outcomes)
    assert sum(t.ignored.values()) == 5


@pytest.mark.parametrize(
    ("record", "words"),
    [
        (claude_code(session=""), "session.id: missing"),
        (claude_code(decision="maybe"), "decision: 'maybe' is not a known verdict"),
        (codex(decision="approved_sometimes"), "not a known verdict"),
        (codex(time=0, observed=0), "no time given"),
        (copilot_feedback(outcome="saved"), "outcome: 'saved'"),
        (copilot_inline(accepted="perhaps"), "accepted: missing or not a boolean"),
        (copilot_survival(rate=1.5), "not a rate in [0, 1]"),
        (copilot_survival(delay_ms=-1), "time_delay_ms"),
        (claude_code(tool_use_id="x" * 2000), "call_id"),
    ],
)
def test_untranslatable_names_the_attribute(record: LogRecord, words: str) -> None:
    resource = (
        {"session.id": "win-1"}
        if record.attributes[0].value.string_value.startswith("copilot")
        else None
    )
    out = refused(record, resource)
    assert words in out.error
    alone = otlp.decode(out.record)
    assert log_record_count(alone) == 1
    assert alone.resource_logs[0].scope_logs[0].log_records[0] == record


def test_copilot_without_a_session_on_its_resource_is_untranslatable() -> None:
    assert "session.id: missing" in refused(copilot_feedback()).error


def test_a_record_exported_twice_is_the_same_decision() -> None:
    first = one(claude_code())
    again = one(claude_code())
    assert first.value == again.value
    assert (
        one(claude_code(tool_use_id="toolu_02")).decision["decision_id"]
        != first.decision["decision_id"]
    )


def test_json_and_protobuf_give_the_same_decisions() -> None:
    req = request(
        [claude_code(), claude_api_request(), codex(), copilot_survival()], COPILOT_RESOURCE
    )
    req.resource_logs[0].scope_logs[0].log_records[0].trace_id = bytes(range(16))
    req.resource_logs[0].scope_logs[0].log_records[0].span_id = bytes(range(8))
    proto = translate_value(req.SerializeToString(), POLICY)
    text = otlp.encode_json(req)
    assert b'"traceId":"000102030405060708090a0b0c0d0e0f"' in text
    json = translate_value(text, POLICY)
    assert proto.outcomes == json.outcomes
    assert json.translated == {"claude-code": 1, "codex": 1, "copilot": 1}


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "not an object"),
        (b'{"resourceLogs": 3}', "not an OTLP JSON"),
        (b'{"resourceLogs": [{"scopeLogs": [{"logRecords": [{"traceId": "zz"}]}]}]}', "not hex"),
        (b"\x0a\xff\xff\xff\xff\x0f", "not an OTLP protobuf"),
        (b"{" * 5000, "not JSON"),
    ],
)
def test_invalid_otlp(value: bytes, words: str) -> None:
    with pytest.raises(otlp.InvalidOtlp, match=words.replace("[", r"\[")):
        translate_value(value, POLICY)


def test_nested_attributes_as_deep_as_protobuf_takes_are_translated() -> None:
    nested: object = "leaf"
    for _ in range(30):  # protobuf refuses past 100 message levels: 3 an attribute level
        nested = {"k": nested}
    raw = one(claude_code(extra={"deep": nested})).decision["raw"]  # type: ignore[dict-item]
    assert isinstance(raw, dict) and "deep" in raw


def test_empty_request_accounts_for_nothing() -> None:
    assert translate_value(b"", POLICY).outcomes == []
    assert translate_value(b"{}", POLICY).outcomes == []


# The records a property draws from: decisions of each agent, and events that are not.
_POOL = [
    claude_code(tool_use_id="t1"),
    claude_code(tool_use_id="t2", decision="reject", source="config"),
    claude_code(session="sess-other", tool_use_id="t3"),
    claude_api_request(),
    codex(call_id="c1"),
    codex(call_id="c2", decision="denied"),
    codex_api_request(),
    copilot_feedback(),
    copilot_inline(),
    copilot_survival(delay_ms=1000),
    copilot_survival(delay_ms=60_000),
    claude_code(decision="maybe"),
]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(range(len(_POOL))), min_size=1, max_size=20),
    st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=20),
    st.booleans(),
)
def test_any_split_gives_the_same_decisions(
    picks: list[int], sizes: list[int], as_json: bool
) -> None:
    """The records in one request, or split into requests of any sizes (each with its
    resource), in protobuf or JSON: the same outcomes in the same order."""
    records = [_POOL[i] for i in picks]
    whole = translate(request(records, COPILOT_RESOURCE), POLICY).outcomes
    parts, at, n = [], 0, 0
    while at < len(records):
        size = sizes[n % len(sizes)]
        parts.append(records[at : at + size])
        at, n = at + size, n + 1
    split = []
    for part in parts:
        req = request(part, COPILOT_RESOURCE)
        value = otlp.encode_json(req) if as_json else req.SerializeToString()
        split.extend(translate_value(value, POLICY).outcomes)
    assert split == whole
    assert len(whole) == len(records)


def test_step_dead_letters_name_the_event_and_carry_the_record_alone() -> None:
    from stream_app.ingest.telemetry import step
    from stream_app.models.dead_letter import DeadLetter

    value = request([claude_code(), claude_code(decision="maybe"), claude_api_request()])
    source = SourceRecord("decisions", "otlp_logs", 2, 7, None, value.SerializeToString())
    done = step(source, POLICY, 1_800_000_000.0)
    assert len(done.translation.decisions) == 1
    (letter,) = done.out.dead_letters
    DeadLetter.model_validate(letter)
    assert letter["reason"] == "untranslatable_telemetry"
    assert (letter["source_topic"], letter["partition"], letter["offset"]) == ("otlp_logs", 2, 7)
    assert letter["error"].startswith("claude_code.tool_decision: decision: 'maybe'")
    carried = otlp.decode(letter["value"].encode())
    assert log_record_count(carried) == 1
    assert sum(done.out.counts.values()) == 1


def test_step_of_a_value_that_is_no_request_is_one_invalid_otlp() -> None:
    from stream_app.ingest.telemetry import step

    for value in (b"{oops", None):
        source = SourceRecord("decisions", "otlp_logs", 0, 3, b"k", value)
        done = step(source, POLICY, 1_800_000_000.0)
        (letter,) = done.out.dead_letters
        assert letter["reason"] == "invalid_otlp"
        assert done.translation.outcomes == []

"""SPEC §2, §3 and §6: what is rejected before a record touches state, and how."""

from __future__ import annotations

import base64

import orjson
import pytest

from stream_app.core.policy import Policy
from stream_app.core.records import SourceRecord
from tests.contracts import validator
from tests.factories import Run, assistant, decision, message


def one_dead_letter(run: Run) -> dict:
    (letter,) = run.dead_letters
    errors = list(validator("dead-letter.v1.json").iter_errors(letter))
    assert not errors, errors[0].message
    return letter


@pytest.mark.parametrize(
    ("msg", "field"),
    [
        ({"content": [{"text": "x"}]}, "message.role"),
        ({"role": "ROLE_ROBOT", "content": [{"text": "x"}]}, "message.role"),
        ({"role": 4, "content": [{"text": "x"}]}, "message.role"),
        ({"role": True, "content": [{"text": "x"}]}, "message.role"),
        ({"role": 1}, "message"),
        ({"role": 1, "content": [], "toolCalls": []}, "message"),
        ({"role": 1, "content": [{"text": "x"}], "sequence": "1.5"}, "message.sequence"),
        ({"role": 1, "content": [{"text": "x"}], "sequence": "abc"}, "message.sequence"),
        ({"role": 1, "content": [{"text": 3}]}, "message.content.0.text"),
        ({"role": 1, "content": [{"text": "a", "reasoning": "b"}]}, "message.content.0"),
        ({"role": 2, "toolCalls": [{"name": "x"}]}, "message.toolCalls.0.id"),
        (
            {"role": 2, "toolCalls": [{"id": "c", "name": "x", "arguments": 5}]},
            "message.toolCalls.0.arguments",
        ),
    ],
)
def test_invalid_messages_are_dead_lettered_as_schema_naming_the_field(
    msg: dict, field: str
) -> None:
    run = Run()
    out = run.msg({"conversationId": "s1", "message": msg}, key=b"s1")
    letter = one_dead_letter(run)
    assert letter["reason"] == "schema"
    assert letter["error"].startswith(field)
    assert out.outcome == "dead_lettered"
    assert not run.revisions


def test_event_without_conversation_id_is_a_schema_dead_letter() -> None:
    run = Run()
    run.msg({"message": {"role": 1, "content": [{"text": "x"}]}})
    assert one_dead_letter(run)["error"].startswith("conversationId")


@pytest.mark.parametrize("sequence", ["7", 7, "-3", 7.0])
def test_sequence_may_be_a_digit_string_or_an_integer(sequence: object) -> None:
    run = Run()
    run.msg(message(sequence=sequence))
    assert not run.dead_letters


def test_invalid_json_keeps_the_original_bytes_and_key() -> None:
    run = Run()
    run.msg(b'{"conversationId": "s1", "message": {', key=b"s1")
    letter = one_dead_letter(run)
    assert letter["reason"] == "invalid_json"
    assert letter["value"] == '{"conversationId": "s1", "message": {'
    assert letter["key"] == "s1"
    assert letter["encoding"] == "utf-8"
    assert (letter["source_topic"], letter["partition"], letter["offset"]) == ("llm.messages", 0, 0)


def test_bytes_that_are_not_utf8_are_dead_lettered_in_base64() -> None:
    run = Run()
    run.msg(b"\xff\xfe not json", key=b"\x00\xff")
    letter = one_dead_letter(run)
    assert letter["encoding"] == "base64"
    assert base64.b64decode(letter["value"]) == b"\xff\xfe not json"
    assert base64.b64decode(letter["key"]) == b"\x00\xff"


def test_records_over_the_size_limit_are_too_large() -> None:
    run = Run(policy=Policy(org_id="acme", max_record_bytes=200))
    run.msg(message(text="x" * 500))
    letter = one_dead_letter(run)
    assert letter["reason"] == "too_large"
    assert "200-byte limit" in letter["error"]


def test_a_tombstone_is_dead_lettered() -> None:
    run = Run()
    for kind, topic in (("messages", "llm.messages"), ("decisions", "developer.decisions")):
        out = run.pipeline.process(SourceRecord(kind, topic, 0, 0, b"s1", None))
        assert out.dead_letters[0]["reason"] == "invalid_json"
        assert out.dead_letters[0]["value"] is None


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"agent_harness": "cursor"}, "agent_harness"),
        ({"interaction_mode": "chat"}, "interaction_mode"),
        ({"edit_retention_score": 1.5}, "edit_retention_score"),
        ({"edit_retention_score": -0.1}, "edit_retention_score"),
        ({"observation_delay_ms": -1}, "observation_delay_ms"),
        ({"observation_delay_ms": 1.5}, "observation_delay_ms"),
        ({"accepted": "yes"}, "accepted"),
        ({"occurred_at": "yesterday"}, "occurred_at"),
        ({"occurred_at": "2026-02-30T10:00:00Z"}, "occurred_at"),
        ({"occurred_at": "2026-01-01T10:00:00"}, "occurred_at"),
        ({"captured_at": "2026-01-01"}, "captured_at"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_invalid_decisions_are_dead_lettered_as_schema_naming_the_field(
    fields: dict, field: str
) -> None:
    run = Run()
    run.dec(decision(**fields))
    letter = one_dead_letter(run)
    assert letter["reason"] == "schema"
    assert letter["error"].startswith(field)


@pytest.mark.parametrize(
    "missing",
    [
        "decision_id",
        "session_id",
        "user_id",
        "agent_harness",
        "file_path",
        "accepted",
        "explicit",
        "interaction_mode",
        "commit_sha",
        "call_id",
        "edit_retention_score",
        "observation_delay_ms",
        "occurred_at",
        "raw",
    ],
)
def test_decisions_missing_a_required_field_are_dead_lettered(missing: str) -> None:
    run = Run()
    d = decision()
    del d[missing]
    run.dec(d)
    letter = one_dead_letter(run)
    assert (letter["reason"], letter["error"].split(":")[0]) == ("schema", missing)


def test_occurred_at_is_never_backfilled() -> None:
    run = Run()
    d = decision()
    del d["occurred_at"]
    run.dec(d)
    assert one_dead_letter(run)["reason"] == "schema"


@pytest.mark.parametrize("org", ["ACME", "  acme ", "\uff41\uff43\uff4d\uff45", "Acme"])
def test_tenant_binding_normalizes_org_ids(org: str) -> None:
    run = Run()
    run.msg(assistant(message_id="m1", orgId=org))
    run.dec(decision(call_id="m1", org_id=org))
    assert not run.dead_letters
    assert run.final()["m1"]["decisions"][0]["org_id"] == "acme"


def test_missing_org_id_is_bound_to_the_deployment() -> None:
    run = Run(policy=Policy(org_id=" Acme "))
    d = decision(call_id="m1")
    del d["org_id"]
    run.msg(assistant(message_id="m1"))
    run.dec(d)
    assert run.final()["m1"]["decisions"][0]["org_id"] == "acme"


def test_decision_of_another_tenant_is_dead_lettered_and_never_joined() -> None:
    run = Run()
    run.dec(decision(call_id="m1", org_id="globex"))
    run.msg(assistant(message_id="m1"))
    assert one_dead_letter(run)["reason"] == "tenant_mismatch"
    assert run.final()["m1"]["decisions"] == []


def test_message_of_another_tenant_is_dead_lettered() -> None:
    run = Run()
    run.msg(assistant(message_id="m1", orgId="Globex"))
    assert one_dead_letter(run)["reason"] == "tenant_mismatch"
    assert not run.revisions


def test_captured_at_is_stamped_on_first_store_and_kept_for_redeliveries() -> None:
    run = Run()
    first = decision(call_id="m1", captured_at=None)
    run.dec(first)
    run.now += 60
    run.dec(first | {"decision_id": "d1-retry"})
    run.msg(assistant(message_id="m1"))
    (d,) = run.final()["m1"]["decisions"]
    assert d["captured_at"] == "2026-01-01T10:00:00.000000Z"
    assert d["decision_id"] == "d1"


def test_raw_is_redacted_before_it_is_stored_or_emitted() -> None:
    run = Run()
    raw = {
        "env": {"OPENAI_API_KEY": "sk-proj-abcdefghijklmnop1234"},
        "cmd": "git push",
        "password": "hunter2",
    }
    run.dec(decision(call_id="m1", raw=raw))
    run.msg(assistant(message_id="m1"))
    emitted = run.final()["m1"]["decisions"][0]["raw"]
    assert emitted == {
        "env": {"OPENAI_API_KEY": "[REDACTED]"},
        "cmd": "git push",
        "password": "[REDACTED]",
    }
    state = run.pipeline.store.get("s1")
    assert state is not None and b"hunter2" not in state.to_json()


def test_dead_letter_value_is_the_original_record() -> None:
    run = Run()
    value = orjson.dumps(decision(org_id="other"))
    run.dec(value, key=b"wrong-key")
    letter = one_dead_letter(run)
    assert letter["value"].encode() == value and letter["key"] == "wrong-key"

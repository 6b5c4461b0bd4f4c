"""Intake's fast path (``core/input_structs.py``) decides nothing the models would decide otherwise.

For any record, ``decode`` gives the same input or the same dead letter (same counts, same
error) with the msgspec Structs as with the pydantic models alone; and the Structs do take
the records producers send, so the fast path is the one records take.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_app.core import decoders, intake
from stream_app.core.policy import Policy
from stream_app.core.records import SourceRecord
from tests.factories import ORG, decision
from tests.models.test_schema_agreement import json_values, mutate

POLICY = Policy(org_id=ORG)
CLOSE = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@contextmanager
def models_only() -> Iterator[None]:
    """``decode`` with the fast path declining every record."""
    fast = decoders._fast_message, decoders._fast_decision
    decoders._fast_message = lambda *args: None  # type: ignore[assignment]
    decoders._fast_decision = lambda *args: None  # type: ignore[assignment]
    try:
        yield
    finally:
        decoders._fast_message, decoders._fast_decision = fast


def record(kind: str, value: bytes) -> SourceRecord:
    return SourceRecord(kind, kind, 0, 7, b"key", value, 1.5)  # type: ignore[arg-type]


def assert_same_decode(kind: str, value: bytes) -> None:
    both = intake.decode(record(kind, value), POLICY, 100.0)
    with models_only():
        alone = intake.decode(record(kind, value), POLICY, 100.0)
    assert both[0] == alone[0], value
    assert both[1] == alone[1], value


def fast(kind: str, value: bytes) -> object:
    """What the fast path makes of a record: None (declined), an input, or what it raised."""
    try:
        doc = intake._parse(value)
        if kind == "messages":
            return decoders._fast_message(doc, record(kind, value), Counter(), POLICY)
        return decoders._fast_decision(doc, record(kind, value), POLICY)
    except Exception as exc:
        return exc


# -- records near the contract, and past it in every way the models check ---------------


# Each field: values the models take, and values they refuse or the fast path declines. A
# record is drawn valid, then at most one of its fields is drawn from the second list.
Pool = tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]


def pool(valid: list[Any], invalid: list[Any]) -> Pool:
    return st.sampled_from(valid), st.sampled_from(invalid)


IDS = pool(["m1", "é", "a\x00b", "x" * 1024], ["", "x" * 1025, 5, None])
DATETIMES = pool(
    ["2026-11-29T10:00:00Z", "2026-11-29t10:00:00.123+05:30", "1970-01-01T00:00:00Z"],
    ["2026-02-30T10:00:00Z", "1969-12-31T23:59:59Z", "2200-01-01T00:00:00Z", "x", None, 5],
)
ORGS = pool([None, ORG, ORG.upper(), " \uff21\uff43\uff4d\uff45 "], ["globex", 3])
ARGUMENTS = (
    st.sampled_from(['{"path": "a.py"}', "not json", "[1]", None])
    | st.dictionaries(st.text(max_size=4), json_values, max_size=3),
    st.sampled_from(["{" * 70 + "}" * 70, 5, ["a"]]),
)
PART = (
    st.fixed_dictionaries({"text": st.text(max_size=8)})
    | st.fixed_dictionaries({"reasoning": st.text(max_size=8)})
    | st.fixed_dictionaries(
        {"toolResult": st.fixed_dictionaries({"toolCallId": IDS[0], "result": json_values})}
    )
    | st.fixed_dictionaries({"image": st.just({"url": "u"})})
    | st.fixed_dictionaries({"text": st.none(), "reasoning": st.text(max_size=3)}),
    st.fixed_dictionaries({"text": st.just(3)})
    | st.fixed_dictionaries({"text": st.text(max_size=3), "reasoning": st.text(max_size=3)})
    | st.fixed_dictionaries({"toolResult": st.fixed_dictionaries({"toolCallId": IDS[1]})})
    | st.dictionaries(st.sampled_from(["text", "toolResult", "other"]), json_values, max_size=2),
)
EVENT_FIELDS: dict[str, Pool] = {
    "conversationId": IDS,
    "eventId": IDS,
    "orgId": ORGS,
    "publishedAt": DATETIMES,
    "extra": (json_values, st.nothing()),
}
MESSAGE_FIELDS: dict[str, Pool] = {
    "role": pool(
        ["ROLE_USER", "ROLE_ASSISTANT", "ROLE_TOOL", "ROLE_SYSTEM", 0, 1, 2, 3, 2.0],
        ["ROLE_ROBOT", "role_user", 4, -1, 2.5, True, None, "2"],
    ),
    "content": (st.lists(PART[0], min_size=1, max_size=3), st.lists(PART[1], max_size=2)),
    "toolCalls": (
        st.lists(
            st.fixed_dictionaries(
                {"id": IDS[0], "name": st.just("edit")}, optional={"arguments": ARGUMENTS[0]}
            ),
            max_size=2,
        ),
        st.lists(
            st.fixed_dictionaries({"id": IDS[1], "name": st.just(5), "arguments": ARGUMENTS[1]}),
            min_size=1,
            max_size=1,
        ),
    ),
    "messageId": pool(["m1", "é", None, ""], ["x" * 1025, 5]),
    "sequence": pool(
        [None, 1, "12", "-3", "١٢", 2.0, 2**63 - 1],
        ["1.5", "abc", 2.5, True, 2**63, -(2**63) - 1, "9" * 30, [1]],
    ),
    "finishReason": pool(["stop", "", None], [1]),
    "usage": (json_values, st.nothing()),
}
DECISION_FIELDS: dict[str, Pool] = {
    "decision_id": IDS,
    "session_id": IDS,
    "user_id": pool([None, "u"], [5]),
    "agent_harness": pool(["claude-code", "codex", "pi", "copilot"], ["vim"]),
    "file_path": pool(["", "a.py"], [None]),
    "accepted": pool([True, False], [1, None]),
    "explicit": pool([True, False], ["yes"]),
    "interaction_mode": pool(["agent", "inline"], ["chat"]),
    "commit_sha": pool([None, "abc"], [1]),
    "call_id": pool([None, "c1", "x" * 1024], ["x" * 1025, 1]),
    "edit_retention_score": pool([None, 0, 1, 0.5], [1.5, -0.1, True, "1"]),
    "observation_delay_ms": pool([None, 0, 5, 5.0, -0.0], [5.5, -1, -1.0, 2**63, 1e19, True]),
    "occurred_at": DATETIMES,
    "raw": (st.dictionaries(st.text(max_size=8), json_values, max_size=4), json_values),
}
OPTIONAL = {"eventId", "orgId", "publishedAt", "extra", "usage", "org_id", "captured_at"}
OPTIONAL |= {"content", "toolCalls", "messageId", "sequence", "finishReason"}
DECISION_FIELDS |= {"org_id": ORGS, "captured_at": DATETIMES}


def drawn(draw: st.DrawFn, fields: dict[str, Pool], broken: str | None) -> dict[str, Any]:
    doc = {}
    for name, (valid, invalid) in fields.items():
        if name == broken:
            doc[name] = draw(invalid)
        elif name not in OPTIONAL or draw(st.booleans()):
            doc[name] = draw(valid)
    return doc


@st.composite
def events(draw: st.DrawFn) -> dict[str, Any]:
    names = [*EVENT_FIELDS, *MESSAGE_FIELDS, "message"]
    broken = draw(st.sampled_from([None] * len(names) + names))
    message = drawn(draw, MESSAGE_FIELDS, broken)
    event = drawn(draw, EVENT_FIELDS, broken)
    if broken != "message":
        event["message"] = message
    return event


@st.composite
def decisions(draw: st.DrawFn) -> dict[str, Any]:
    names = [*DECISION_FIELDS, "missing", "extra"]
    broken = draw(st.sampled_from([None] * len(names) + names))
    doc = drawn(draw, DECISION_FIELDS, broken)
    if broken == "missing":
        del doc[draw(st.sampled_from(sorted(doc)))]
    elif broken == "extra":
        doc["extra"] = draw(json_values)
    return doc


def spellings(doc: Any) -> st.SearchStrategy[bytes]:
    """The document as a producer may write it: compact, spaced, or with escapes."""
    return st.sampled_from(
        [
            json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode(),
            json.dumps(doc, indent=1).encode(),
            json.dumps(doc).encode(),
        ]
    )


@pytest.mark.parametrize(("kind", "records"), [("messages", events), ("decisions", decisions)])
@CLOSE
@given(data=st.data())
def test_records_decode_alike_with_and_without_the_fast_path(
    kind: str, records: Callable[[], st.SearchStrategy[dict[str, Any]]], data: st.DataObject
) -> None:
    doc = data.draw(records())
    if data.draw(st.integers(0, 3)) == 0:
        doc = mutate(doc, data)
    assert_same_decode(kind, data.draw(spellings(doc)))


GOOD_EVENT = {
    "eventId": "e1",
    "conversationId": "s1",
    "orgId": "ACME",
    "publishedAt": "2026-11-29T10:00:00Z",
    "message": {
        "role": "ROLE_ASSISTANT",
        "messageId": "m1",
        "sequence": "4",
        "content": [{"reasoning": "r"}, {"text": "t"}, {"image": {}}],
        "toolCalls": [{"id": "c1", "name": "edit", "arguments": '{"path": "a.py"}'}],
        "finishReason": "tool_calls",
        "usage": {"inputTokens": 3},
    },
}
GOOD_DECISION = decision(
    org_id=ORG.upper(),
    occurred_at="2026-11-29T10:00:00+01:00",
    edit_retention_score=1,
    observation_delay_ms=5.0,
    captured_at=None,
    raw={"password": "hunter2", "tool": "Edit"},
)


@pytest.mark.parametrize(("kind", "doc"), [("messages", GOOD_EVENT), ("decisions", GOOD_DECISION)])
def test_records_producers_send_take_the_fast_path(kind: str, doc: dict[str, Any]) -> None:
    value = orjson.dumps(doc)
    taken = fast(kind, value)
    assert taken is not None and not isinstance(taken, Exception)
    assert_same_decode(kind, value)


MESSAGE = b'{"conversationId":"s","message":{"role":1,"content":[{"text":"x"}]}'


@pytest.mark.parametrize(
    "value",
    [
        MESSAGE + b',"extra":"\xff"}',
        MESSAGE + b',"extra":"\\ud800"}',
        MESSAGE + b',"extra":1e999}',
        MESSAGE + b',"extra":123456789012345678901234567890}',
        MESSAGE + b',"extra":' + b"[" * 70 + b"]" * 70 + b"}",
        MESSAGE + b"} x",
        b'{"conversationId":"s",' + MESSAGE[1:] + b"}",
        b'{"conversationId":"s","message":{"role":1,"content":[{"toolResult":'
        b'{"toolCallId":"c","result":123456789012345678901234567890}}]}}',
    ],
    ids=[
        "invalid-utf8",
        "lone-surrogate",
        "infinite-number",
        "long-integer",
        "deep",
        "trailing",
        "duplicate-key",
        "long-integer-result",
    ],
)
def test_text_anywhere_in_a_record_decodes_alike(value: bytes) -> None:
    """The Structs check the document orjson parsed, so what JSON text orjson refuses or
    reads its own way, even in a field the Structs skip, is decided as the models decide."""
    assert_same_decode("messages", value)


def test_a_redacted_content_deployment_decodes_alike() -> None:
    policy = Policy(org_id=ORG, redact_content=True)
    event = {**GOOD_EVENT, "message": {**GOOD_EVENT["message"], "messageId": None}}
    value = orjson.dumps(event)
    both = intake.decode(record("messages", value), policy, 1.0)
    with models_only():
        alone = intake.decode(record("messages", value), policy, 1.0)
    assert both == alone
    assert both[0] is not None

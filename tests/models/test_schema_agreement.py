"""The pydantic models and the published JSON Schemas accept and reject the same documents.

The corpus: documents generated from each schema (valid by construction), the same
documents with one value replaced by arbitrary JSON or one key removed (mostly invalid),
and hand-written edge cases where Python and JSON Schema are known to differ.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from jsonschema import Draft202012Validator
from pydantic import BaseModel, ValidationError

from stream_app.models import (
    DeadLetter,
    DecisionPayload,
    DeveloperDecision,
    InferenceMessage,
    LLMMessagePublishedEvent,
    Turn,
)
from tests.contracts import SCHEMAS, validator


def payload_schema() -> dict[str, Any]:
    """The input decision: the contract with org_id and captured_at optional and nullable."""
    schema = json.loads((SCHEMAS / "developer-decision.v1.json").read_text())
    schema["required"] = [f for f in schema["required"] if f not in ("org_id", "captured_at")]
    for name in ("org_id", "captured_at"):
        schema["properties"][name] = {"anyOf": [schema["properties"][name], {"type": "null"}]}
    return schema


PAIRS: dict[str, tuple[type[BaseModel], dict[str, Any]]] = {
    name: (model, json.loads((SCHEMAS / file).read_text()))
    for name, model, file in [
        ("decision", DeveloperDecision, "developer-decision.v1.json"),
        ("event", LLMMessagePublishedEvent, "llm-message-published-event.v1.json"),
        ("inference_message", InferenceMessage, "inference-message.v1.json"),
        ("turn", Turn, "turn.v1.json"),
        ("dead_letter", DeadLetter, "dead-letter.v1.json"),
    ]
}
PAIRS["decision_payload"] = (DecisionPayload, payload_schema())

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def model_accepts(model: type[BaseModel], doc: Any) -> bool:
    try:
        model.model_validate(doc)
    except ValidationError:
        return False
    return True


CHECKERS = {
    name: Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    for name, (_, schema) in PAIRS.items()
}
GENERATORS = {name: from_schema(schema) for name, (_, schema) in PAIRS.items()}


def assert_agree(name: str, doc: Any) -> None:
    model = PAIRS[name][0]
    by_schema = CHECKERS[name].is_valid(doc)
    assert model_accepts(model, doc) == by_schema, (
        f"{model.__name__} {'rejects' if by_schema else 'accepts'} what the schema "
        f"{'accepts' if by_schema else 'rejects'}: {doc!r}"
    )


def mutate(doc: Any, data: st.DataObject) -> Any:
    """Replace one value somewhere in the document, or delete one key."""
    doc = copy.deepcopy(doc)
    node = doc
    while True:
        children = (
            list(node.items())
            if isinstance(node, dict)
            else list(enumerate(node))
            if isinstance(node, list)
            else []
        )
        if not children:
            return data.draw(json_values)
        key, child = data.draw(st.sampled_from(children))
        if isinstance(child, dict | list) and child and data.draw(st.booleans()):
            node = child
            continue
        if isinstance(node, dict) and data.draw(st.booleans()):
            del node[key]
        else:
            node[key] = data.draw(json_values)
        return doc


AGREEMENT = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)


@pytest.mark.slow  # generating the documents takes about 40 s on 2 cores
@pytest.mark.parametrize("name", sorted(PAIRS))
@AGREEMENT
@given(data=st.data())
def test_models_and_schemas_agree_on_generated_documents(name: str, data: st.DataObject) -> None:
    valid = data.draw(GENERATORS[name], label="generated")
    assert_agree(name, valid)
    assert_agree(name, mutate(valid, data))


GOOD_DECISION = {
    "decision_id": "d",
    "org_id": "acme",
    "session_id": "s",
    "user_id": None,
    "agent_harness": "pi",
    "file_path": "",
    "accepted": True,
    "explicit": False,
    "interaction_mode": "inline",
    "commit_sha": None,
    "call_id": None,
    "edit_retention_score": None,
    "observation_delay_ms": None,
    "occurred_at": "2026-01-01T00:00:00Z",
    "captured_at": "2026-01-01T00:00:00.5+05:30",
    "raw": {},
}
GOOD_MESSAGE = {"role": "ROLE_USER", "content": [{"text": "x"}]}
GOOD_LETTER = {
    "source_topic": "t",
    "partition": 0,
    "offset": 0,
    "key": None,
    "value": "v",
    "encoding": "utf-8",
    "reason": "turn_too_large",
    "error": "e",
    "dead_lettered_at": "2026-01-01T00:00:00Z",
}
SHA = "0123456789abcdef" * 4
VALUE_CUT = {"truncated": True, "original_length": 9, "original_sha256": SHA}
KEY_CUT = {"truncated": True, "original_key_length": 9, "original_key_sha256": SHA}
TRUNCATIONS: list[dict[str, Any]] = [
    VALUE_CUT,
    KEY_CUT,
    VALUE_CUT | KEY_CUT,
    VALUE_CUT | {"original_length": 9.0},
    VALUE_CUT | {"truncated": False},
    VALUE_CUT | {"truncated": 1},
    VALUE_CUT | {"truncated": None},
    VALUE_CUT | {"original_length": None},
    VALUE_CUT | {"original_length": -1},
    VALUE_CUT | {"original_sha256": SHA.upper()},
    VALUE_CUT | {"original_sha256": SHA[:-1] + "\n"},
    VALUE_CUT | {"original_sha256": SHA + "\n"},
    {"truncated": True},
    {"original_length": 9, "original_sha256": SHA},
    {"truncated": True, "original_length": 9},
    {"truncated": True, "original_key_sha256": SHA},
    VALUE_CUT | {"original_key_length": 1},
]


@pytest.mark.parametrize(
    ("name", "doc"),
    [
        ("decision", GOOD_DECISION),
        ("decision", GOOD_DECISION | {"observation_delay_ms": 5.0}),
        ("decision", GOOD_DECISION | {"observation_delay_ms": True}),
        ("decision", GOOD_DECISION | {"edit_retention_score": 1}),
        ("decision", GOOD_DECISION | {"edit_retention_score": True}),
        ("decision", GOOD_DECISION | {"edit_retention_score": 1.0000001}),
        ("decision", GOOD_DECISION | {"accepted": 1}),
        ("decision", GOOD_DECISION | {"occurred_at": "2026-01-01t00:00:00z"}),
        ("decision", GOOD_DECISION | {"occurred_at": "2024-02-29T23:59:59.123456789-00:00"}),
        ("decision", GOOD_DECISION | {"occurred_at": "2023-02-29T00:00:00Z"}),
        ("decision", GOOD_DECISION | {"occurred_at": "0000-01-01T00:00:00Z"}),
        ("decision", GOOD_DECISION | {"occurred_at": "2026-01-01T23:59:60Z"}),
        ("decision", GOOD_DECISION | {"occurred_at": "2026-01-01 00:00:00Z"}),
        ("decision", GOOD_DECISION | {"raw": []}),
        ("decision", {k: v for k, v in GOOD_DECISION.items() if k != "user_id"}),
        (
            "decision_payload",
            {k: v for k, v in GOOD_DECISION.items() if k not in ("org_id", "captured_at")},
        ),
        ("decision_payload", GOOD_DECISION | {"org_id": None, "captured_at": None}),
        ("event", {"conversationId": "s", "message": GOOD_MESSAGE}),
        ("event", {"conversationId": "", "message": GOOD_MESSAGE}),
        ("event", {"conversationId": "s", "message": GOOD_MESSAGE, "orgId": None, "x": 1}),
        ("event", {"conversationId": "s", "message": GOOD_MESSAGE | {"role": 3.0}}),
        ("event", {"conversationId": "s", "message": GOOD_MESSAGE | {"role": False}}),
        ("event", {"conversationId": "s", "message": GOOD_MESSAGE | {"role": "ROLE_UNSPECIFIED"}}),
        ("event", {"conversationId": "s", "message": GOOD_MESSAGE | {"sequence": "-12"}}),
        ("event", {"conversationId": "s", "message": GOOD_MESSAGE | {"sequence": "12\n"}}),
        ("event", {"conversationId": "s", "message": GOOD_MESSAGE | {"sequence": "+12"}}),
        ("event", {"conversationId": "s", "message": GOOD_MESSAGE | {"sequence": 1.5}}),
        ("event", {"conversationId": "s", "message": {"role": 1, "content": [{"image": 1}]}}),
        ("event", {"conversationId": "s", "message": {"role": 1, "content": [{"text": None}]}}),
        ("event", {"conversationId": "s", "message": {"role": 1, "content": [5]}}),
        (
            "event",
            {
                "conversationId": "s",
                "message": {"role": 1, "content": [{"text": "a", "reasoning": None}]},
            },
        ),
        (
            "event",
            {
                "conversationId": "s",
                "message": {
                    "role": 1,
                    "content": [{"text": "a", "toolResult": {"toolCallId": "c", "result": None}}],
                },
            },
        ),
        (
            "event",
            {
                "conversationId": "s",
                "message": {"role": 1, "content": [{"toolResult": {"toolCallId": "c"}}]},
            },
        ),
        (
            "event",
            {
                "conversationId": "s",
                "message": {"role": 2, "content": None, "toolCalls": [{"id": "c", "name": "n"}]},
            },
        ),
        (
            "event",
            {
                "conversationId": "s",
                "message": {"role": 2, "toolCalls": [{"id": "c", "name": "n", "arguments": ["x"]}]},
            },
        ),
        ("event", {"conversationId": "s", "publishedAt": "yesterday", "message": GOOD_MESSAGE}),
        (
            "turn",
            {
                "new_messages": [],
                "completion": "",
                "decisions": [],
                "inference_call_id": "x",
                "tool_calls": [],
            },
        ),
        (
            "turn",
            {
                "new_messages": [],
                "completion": "",
                "decisions": [GOOD_DECISION],
                "inference_call_id": "x",
                "tool_calls": [{"type": "tool_call", "id": "c", "name": "n", "arguments": {}}],
            },
        ),
        (
            "turn",
            {
                "new_messages": [
                    {"role": "user", "parts": [{"type": "image"}], "finish_reason": None}
                ],
                "completion": "",
                "decisions": [],
                "inference_call_id": "x",
                "tool_calls": [],
            },
        ),
        (
            "dead_letter",
            {
                "source_topic": "t",
                "partition": 0,
                "offset": 3.0,
                "key": None,
                "value": None,
                "encoding": "utf-8",
                "reason": "schema",
                "error": "e",
                "dead_lettered_at": "2026-01-01T00:00:00Z",
            },
        ),
        *(("dead_letter", GOOD_LETTER | extra) for extra in TRUNCATIONS),
    ],
)
def test_models_and_schemas_agree_on_edge_cases(name: str, doc: Any) -> None:
    assert_agree(name, doc)


def test_the_format_checker_really_checks_date_times() -> None:
    """Without rfc3339-validator, jsonschema skips date-time silently; these tests need it."""
    assert not validator("developer-decision.v1.json").is_valid(
        GOOD_DECISION | {"occurred_at": "not a date"}
    )

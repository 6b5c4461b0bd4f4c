"""Issue 10: poison records end as dead letters, never as a crash, and every dead letter fits.

Each case goes through the pipeline the way the worker drives it (decode, the session input
across the repartition topic, apply, state serialized for the changelog) and every output
is serialized with orjson. ``tests/test_replay.py`` runs the same cases through
``stream-app replay``.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_app.core.dead_letter import (
    DEAD_LETTER_KEY_MAX_BYTES,
    DEAD_LETTER_MAX_BYTES,
    original_key,
    turn_too_large,
)
from stream_app.core.limits import MAX_DEPTH, MAX_ID_CHARS
from stream_app.core.policy import Policy
from stream_app.core.records import Outputs, SourceRecord, dump_input, load_input
from stream_app.core.session import SessionState
from tests.contracts import assert_valid_turn, assert_valid_turn_key, validator
from tests.factories import ORG, Run, assistant, decision, message, tool_call


def encode(value: Any) -> bytes:
    """JSON of anything a producer could send: any depth, integers past 64 bits."""
    out: list[str] = []
    stack: list[Any] = [value]
    close = object()
    while stack:
        item = stack.pop()
        if isinstance(item, tuple) and item and item[0] is close:
            out.append(item[1])
        elif isinstance(item, dict):
            out.append("{")
            stack.append((close, "}"))
            entries = list(item.items())
            for i in range(len(entries) - 1, -1, -1):
                stack.extend((entries[i][1], (close, json.dumps(entries[i][0]) + ":")))
                if i:
                    stack.append((close, ","))
        elif isinstance(item, list):
            out.append("[")
            stack.append((close, "]"))
            for i in range(len(item) - 1, -1, -1):
                stack.append(item[i])
                if i:
                    stack.append((close, ","))
        else:
            out.append(json.dumps(item, ensure_ascii=False))
    return "".join(out).encode()


def nest(levels: int, kind: str = "dict", leaf: Any = "x") -> Any:
    """A value of ``levels`` nested objects (or arrays) around ``leaf``."""
    value = leaf
    for _ in range(levels):
        value = {"a": value} if kind == "dict" else [value]
    return value


def check_letter(letter: dict[str, Any]) -> None:
    errors = list(validator("dead-letter.v1.json").iter_errors(letter))
    assert not errors, errors[0].message
    assert len(orjson.dumps(letter)) <= DEAD_LETTER_MAX_BYTES


def check_outputs(run: Run, out: Outputs) -> None:
    """Everything the worker would write: turns, dead letters, every session's state."""
    for revision in out.turns:
        orjson.dumps(revision.turn)
        assert_valid_turn(revision.turn)
        assert_valid_turn_key(revision.key_bytes, revision.turn, revision.session_id)
    for letter in out.dead_letters:
        check_letter(letter)
    store = run.pipeline.store
    for sid in store.session_ids():
        state = store.get(sid)
        assert state is not None
        assert SessionState.from_json(state.to_json()).to_json() == state.to_json()


def feed(run: Run, kind: str, raw: bytes, key: bytes | None = None) -> Outputs:
    """One record as the worker applies it: decoded, shipped to its session, applied."""
    topic = "llm.messages" if kind == "messages" else "developer.decisions"
    record = SourceRecord(kind, topic, 0, run.offset, key, raw)  # type: ignore[arg-type]
    run.offset += 1
    item, out = run.pipeline.decode(record)
    if item is not None:
        applied = run.pipeline.apply(load_input(dump_input(item)))
        applied.counts.update(out.counts)
        out = applied
    check_outputs(run, out)
    run.outputs.append(out)
    return out


def only_letter(out: Outputs, reason: str = "schema") -> dict[str, Any]:
    (letter,) = out.dead_letters
    assert letter["reason"] == reason, letter["error"]
    assert out.outcome == "dead_lettered"
    return letter


# -- instants --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("occurred_at", "0001-01-01T00:00:00Z"),
        ("occurred_at", "9999-12-31T23:59:59Z"),
        ("occurred_at", "1969-12-31T23:59:59.999999999Z"),
        ("occurred_at", "1970-01-01T00:30:00+01:00"),  # 1969-12-31T23:30:00Z
        ("occurred_at", "2200-01-01T00:00:00Z"),
        ("occurred_at", "2199-12-31T23:30:00-01:00"),  # 2200-01-01T00:30:00Z
        ("captured_at", "0001-01-01T00:00:00Z"),
        ("captured_at", "9999-12-31T23:59:59Z"),
    ],
)
def test_instants_outside_the_accepted_range_are_schema_dead_letters(
    field: str, value: str
) -> None:
    run = Run()
    letter = only_letter(feed(run, "decisions", orjson.dumps(decision(**{field: value}))))
    assert letter["error"].startswith(f"{field}: ")
    assert "1970-01-01T00:00:00Z" in letter["error"] and "2200-01-01T00:00:00Z" in letter["error"]


@pytest.mark.parametrize(
    "occurred",
    ["1970-01-01T00:00:00Z", "2199-12-31T23:59:59.999999999Z", "1970-01-01T01:00:00+01:00"],
)
def test_instants_at_the_edges_of_the_range_are_accepted(occurred: str) -> None:
    run = Run()
    feed(run, "messages", orjson.dumps(assistant(message_id="m1")))
    out = feed(run, "decisions", orjson.dumps(decision(call_id="m1", occurred_at=occurred)))
    assert not out.dead_letters and out.turns[0].turn["decisions"][0]["occurred_at"] == occurred


# -- numbers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "field"),
    [
        (
            b'{"conversationId": "s1", "message": {"role": 1, "sequence": "99999999999999999999", '
            b'"content": [{"text": "x"}]}}',
            "message.sequence",
        ),
        (
            b'{"conversationId": "s1", "message": {"role": 1, "sequence": 1e20, '
            b'"content": [{"text": "x"}]}}',
            "message.sequence",
        ),
        (
            b'{"conversationId": "s1", "message": {"role": 1, "sequence": 99999999999999999999, '
            b'"content": [{"text": "x"}]}}',
            "message.sequence",
        ),
        (
            b'{"conversationId": "s1", "message": {"role": 1, "sequence": "-9223372036854775809", '
            b'"content": [{"text": "x"}]}}',
            "message.sequence",
        ),
        (
            b'{"conversationId": "s1", "message": {"role": 1, "sequence": 9223372036854775808, '
            b'"content": [{"text": "x"}]}}',
            "message.sequence",
        ),
    ],
)
def test_sequences_past_64_bits_are_schema_dead_letters(record: bytes, field: str) -> None:
    run = Run()
    letter = only_letter(feed(run, "messages", record))
    assert letter["error"].startswith(f"{field}: ") and "64-bit" in letter["error"]


@pytest.mark.parametrize("delay", [b"1e20", b"99999999999999999999", b"9223372036854775808"])
def test_observation_delays_past_64_bits_are_schema_dead_letters(delay: bytes) -> None:
    run = Run()
    record = orjson.dumps(decision(observation_delay_ms=12345)).replace(b"12345", delay)
    letter = only_letter(feed(run, "decisions", record))
    assert letter["error"].startswith("observation_delay_ms: ")


def test_the_largest_64_bit_values_are_accepted() -> None:
    run = Run()
    top = 2**63 - 1
    feed(run, "messages", orjson.dumps(message(sequence=str(top), message_id="u")))
    out = feed(run, "messages", orjson.dumps(assistant(message_id="m1", sequence=top)))
    assert not out.dead_letters and len(out.turns) == 1
    out = feed(run, "decisions", orjson.dumps(decision(call_id="m1", observation_delay_ms=top)))
    assert not out.dead_letters


# -- nesting ---------------------------------------------------------------------------

DEEP = [MAX_DEPTH, 255, 300, 1000]  # 1000 + the fields around it stays within orjson's 1024


def deep_message(where: str, levels: int, kind: str) -> Any:
    value = nest(levels, kind)
    if where == "result":
        content = [{"toolResult": {"toolCallId": "c0", "result": value}}]
        return message(role="ROLE_TOOL", content=content, message_id="t1")
    if where == "arguments":
        return assistant(message_id="m1", tool_calls=[tool_call("c1", arguments={"a": value})])
    # arguments as JSON text, nested on their own
    text = encode({"a": value}).decode()
    return assistant(message_id="m1", tool_calls=[tool_call("c1", arguments=text)])


@pytest.mark.parametrize("levels", DEEP)
@pytest.mark.parametrize("kind", ["dict", "list"])
def test_raw_nested_too_deep_is_a_schema_dead_letter(levels: int, kind: str) -> None:
    run = Run()
    out = feed(run, "decisions", encode(decision(raw={"a": nest(levels, kind)})))
    letter = only_letter(out)
    assert letter["error"] == f"raw: is nested more than {MAX_DEPTH} levels deep"


@pytest.mark.parametrize("levels", DEEP)
@pytest.mark.parametrize("kind", ["dict", "list"])
@pytest.mark.parametrize(
    ("where", "field"),
    [
        ("result", "message.content.0.toolResult.result"),
        ("arguments", "message.toolCalls.0.arguments"),
        ("arguments_text", "message.toolCalls.0.arguments"),
    ],
)
def test_tool_values_nested_too_deep_are_schema_dead_letters(
    where: str, field: str, levels: int, kind: str
) -> None:
    run = Run()
    letter = only_letter(feed(run, "messages", encode(deep_message(where, levels, kind))))
    assert letter["error"] == f"{field}: is nested more than {MAX_DEPTH} levels deep"


def test_a_record_nested_past_the_parser_limit_is_a_schema_dead_letter() -> None:
    run = Run()
    letter = only_letter(feed(run, "messages", b"[" * 1100 + b"]" * 1100))
    assert letter["error"] == f"(record): is nested more than {MAX_DEPTH} levels deep"


def test_a_record_nested_exactly_to_the_limit_is_accepted() -> None:
    run = Run()
    # decision (1) > raw (2) > ... : 64 levels in all
    out = feed(run, "decisions", encode(decision(call_id="m1", raw=nest(MAX_DEPTH - 1))))
    assert not out.dead_letters
    args = {"a": nest(MAX_DEPTH - 1)}  # 64 levels of their own, sent as text
    msg = assistant(message_id="m1", tool_calls=[tool_call("m1", arguments=encode(args).decode())])
    out = feed(run, "messages", orjson.dumps(msg))
    assert not out.dead_letters and out.turns[0].turn["tool_calls"][0]["arguments"] == args
    assert out.turns[0].turn["decisions"][0]["raw"] == nest(MAX_DEPTH - 1)


# -- ids -------------------------------------------------------------------------------

LONG = "i" * (MAX_ID_CHARS + 1)


@pytest.mark.parametrize(
    ("value", "field"),
    [
        (message(LONG), "conversationId"),
        (message(eventId=LONG), "eventId"),
        (message(message_id=LONG), "message.messageId"),
        (assistant(message_id="m1", tool_calls=[tool_call(LONG)]), "message.toolCalls.0.id"),
        (
            message(role="ROLE_TOOL", content=[{"toolResult": {"toolCallId": LONG, "result": 1}}]),
            "message.content.0.toolResult.toolCallId",
        ),
    ],
)
def test_message_ids_over_the_cap_are_schema_dead_letters(value: Any, field: str) -> None:
    run = Run()
    letter = only_letter(feed(run, "messages", orjson.dumps(value)))
    assert letter["error"].startswith(f"{field}: is {MAX_ID_CHARS + 1} characters")


@pytest.mark.parametrize("field", ["decision_id", "session_id", "call_id"])
def test_decision_ids_over_the_cap_are_schema_dead_letters(field: str) -> None:
    run = Run()
    letter = only_letter(feed(run, "decisions", orjson.dumps(decision(**{field: LONG}))))
    assert letter["error"].startswith(f"{field}: is {MAX_ID_CHARS + 1} characters")


def test_ids_at_the_cap_are_accepted() -> None:
    run = Run()
    at = "\u00e9" * MAX_ID_CHARS  # characters, not bytes
    msg = assistant(at, message_id=at, tool_calls=[tool_call(at)], eventId=at)
    assert not feed(run, "messages", orjson.dumps(msg)).dead_letters
    out = feed(run, "decisions", orjson.dumps(decision(at, at, decision_id=at)))
    assert not out.dead_letters and len(out.turns) == 1


# -- dead letters always fit -----------------------------------------------------------


def assert_cut(letter: dict[str, Any], original: bytes) -> None:
    """A truncated dead letter: a prefix of the original, and the original's figures."""
    check_letter(letter)
    assert letter["truncated"] is True
    assert letter["original_length"] == len(original)
    assert letter["original_sha256"] == hashlib.sha256(original).hexdigest()
    carried = (
        base64.b64decode(letter["value"])
        if letter["encoding"] == "base64"
        else letter["value"].encode()
    )
    assert original.startswith(carried) and len(carried) < len(original)
    assert len(orjson.dumps(letter)) > DEAD_LETTER_MAX_BYTES - 64  # cut no more than needed


def test_a_too_large_record_carries_a_truncated_value() -> None:
    run = Run()
    raw = orjson.dumps(message(text="y" * 3 * 1024 * 1024))
    letter = only_letter(feed(run, "messages", raw, key=b"s1"), "too_large")
    assert_cut(letter, raw)
    assert letter["key"] == "s1" and "original_key_length" not in letter


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"\xff" * 900_000, "invalid_json"),  # base64: 1.2 MB
        (b"\x01" * 1_000_000, "invalid_json"),  # \u0001 each: 6 MB
        (orjson.dumps(message(role="ROLE_ROBOT", text='"' * 450_000)), "schema"),  # \\\" each
        (b'"' + b"\x1f" * 1_000_000, "invalid_json"),
        (orjson.dumps(decision(org_id="globex", raw={"q": "\\" * 500_000})), "tenant_mismatch"),
    ],
    ids=["ff-bytes", "control-bytes", "quotes", "control-in-string", "backslashes"],
)
def test_a_dead_letter_that_would_grow_past_the_cap_is_truncated(raw: bytes, reason: str) -> None:
    run = Run()
    kind = "decisions" if b"org_id" in raw else "messages"
    assert len(raw) <= run.policy.max_record_bytes
    letter = only_letter(feed(run, kind, raw), reason)
    assert_cut(letter, raw)


def test_a_dead_letter_from_state_is_truncated_too() -> None:
    run = Run()
    quotes = '"' * 500_000  # the stored record is re-serialized with raw redacted
    out = feed(run, "decisions", orjson.dumps(decision(call_id=None, raw={"q": quotes})))
    letter = only_letter(out, "unattributable_decision")
    stored = orjson.dumps(decision(call_id=None, raw={"q": quotes}))
    assert_cut(letter, stored)


def test_a_huge_key_is_cut_and_still_a_prefix_of_the_original() -> None:
    run = Run()
    for key in (b"k" * 100_000, b"\xfe" * 100_000):
        letter = feed(run, "messages", b"not json", key=key).dead_letters[0]
        check_letter(letter)
        assert letter["truncated"] is True and "original_length" not in letter
        assert letter["original_key_length"] == len(key)
        assert letter["original_key_sha256"] == hashlib.sha256(key).hexdigest()
        cut = original_key(letter)
        assert cut is not None and key.startswith(cut)
        assert len(orjson.dumps(letter["key"])) <= DEAD_LETTER_KEY_MAX_BYTES


def test_small_dead_letters_are_not_marked() -> None:
    run = Run()
    letter = only_letter(feed(run, "messages", b"\x01" * 60_000, key=b"k"), "invalid_json")
    assert letter["value"] == "\x01" * 60_000 and "truncated" not in letter


def test_an_overlong_error_is_clipped() -> None:
    run = Run()
    org = "x" * 100_000
    letter = only_letter(
        feed(run, "decisions", orjson.dumps(decision(org_id=org))), "tenant_mismatch"
    )
    assert len(letter["error"]) <= 2000 and letter["error"].endswith("…")


# -- turn_too_large --------------------------------------------------------------------


@pytest.mark.parametrize("size", [10, 2 * 1024 * 1024])
def test_turn_too_large_carries_the_key_and_the_turn(size: int) -> None:
    big = 4 * 1024 * 1024
    run = Run(policy=Policy(org_id=ORG, max_record_bytes=big, max_turn_bytes=big))
    feed(run, "messages", orjson.dumps(message(text="z" * size, message_id="u1")))
    (revision,) = feed(run, "messages", orjson.dumps(assistant(message_id="m1"))).turns
    letter = turn_too_large(revision, ("llm.messages", 3, 41), "MessageSizeTooLargeError", run.now)
    check_letter(letter)
    assert letter["reason"] == "turn_too_large"
    assert (letter["source_topic"], letter["partition"], letter["offset"]) == (
        "llm.messages",
        3,
        41,
    )
    assert letter["key"] == revision.key and letter["encoding"] == "utf-8"
    assert "'s1'" in letter["error"] and "'m1'" in letter["error"]
    assert "MessageSizeTooLargeError" in letter["error"]
    body = orjson.dumps(revision.turn)
    if len(body) < DEAD_LETTER_MAX_BYTES // 2:
        assert orjson.loads(letter["value"]) == revision.turn and "truncated" not in letter
    else:
        assert_cut(letter, body)


def test_a_turn_over_the_limit_is_a_turn_too_large_dead_letter_not_an_emission() -> None:
    run = Run(policy=Policy(org_id=ORG, max_record_bytes=4 * 1024 * 1024))
    feed(run, "messages", orjson.dumps(message(text="z" * (1024 * 1024 + 1), message_id="u1")))
    out = feed(run, "messages", orjson.dumps(assistant(message_id="m1")))
    assert out.turns == []
    (letter,) = out.dead_letters
    check_letter(letter)
    assert letter["reason"] == "turn_too_large" and "'m1'" in letter["error"]
    assert out.counts["dead_letter:turn_too_large"] == 1 and out.counts["turns_emitted"] == 0


# -- anything at all -------------------------------------------------------------------

STRANGE_STRINGS = [
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z",
    "2026-01-01T10:00:00Z",
    "1970-01-01T00:00:00+00:01",
    "99999999999999999999",
    "-9223372036854775809",
    "1e20",
    "c1",
    "m1",
    "ROLE_ASSISTANT",
    "claude-code",
    '\x00"\\:[]{}',
    "x" * (MAX_ID_CHARS + 1),
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([1e20, -1e20, 1.5e308, 0.5, -0.0, 2.0, 3.0, 2**63, 2**64, -(2**63) - 1]),
    st.text(max_size=12),
    st.sampled_from(STRANGE_STRINGS),
)
deep_values = st.builds(
    nest, st.integers(MAX_DEPTH - 2, 1100), st.sampled_from(["dict", "list"]), scalars
)
hostile = st.one_of(
    st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.sampled_from(["text", "a", "toolResult", "x"]), inner, max_size=3)
        ),
        max_leaves=6,
    ),
    deep_values,
)


def good_message() -> dict[str, Any]:
    return assistant(
        "s1",
        "done",
        message_id="m2",
        sequence="7",
        eventId="e1",
        orgId=ORG,
        publishedAt="2026-01-01T10:00:00Z",
        content=[
            {"text": "a"},
            {"reasoning": "b"},
            {"toolResult": {"toolCallId": "c0", "result": {"r": [1]}}},
        ],
        tool_calls=[tool_call("c1", arguments={"path": "a.py"})],
    )


def paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place a value sits in ``doc``, the containers included."""
    found = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            found += paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            found += paths(v, (*prefix, i))
    return found


def replace_at(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    doc = orjson.loads(orjson.dumps(doc))
    node = doc
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return doc


MESSAGE_PATHS = paths(good_message())
DECISION_PATHS = paths(decision(call_id="c1"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["messages", "decisions"]),
    data=st.data(),
    value=hostile,
    as_text=st.booleans(),
    key=st.one_of(st.none(), st.binary(max_size=8), st.just(b"\xff" * 20_000)),
)
def test_hostile_values_anywhere_never_raise_and_every_output_serializes(
    kind: str, data: st.DataObject, value: Any, as_text: bool, key: bytes | None
) -> None:
    template = good_message() if kind == "messages" else decision(call_id="c1")
    path = data.draw(st.sampled_from(MESSAGE_PATHS if kind == "messages" else DECISION_PATHS))
    if as_text and path[-1] == "arguments":
        value = encode(value).decode()  # arguments may come as JSON text
    hostile_doc = replace_at(template, path, value)
    run = Run()
    feed(run, "messages", orjson.dumps(message(message_id="u1", sequence=1)), key=b"s1")
    feed(run, "messages", orjson.dumps(assistant(message_id="m1", tool_calls=[tool_call("c1")])))
    feed(run, kind, encode(hostile_doc), key=key)
    feed(run, "decisions", orjson.dumps(decision(call_id="c1", decision_id="d9")))
    feed(run, "messages", orjson.dumps(assistant(message_id="m3", sequence=9)))
    run.now += 10 * 24 * 3600
    out = run.pipeline.tick()
    check_outputs(run, out)

"""SPEC §2: a Message becomes an InferenceMessage."""

from __future__ import annotations

import pytest

from tests.factories import Run, assistant, message, tool_call


def only_turn(run: Run) -> dict:
    (turn,) = run.revisions
    return turn


@pytest.mark.parametrize(
    ("role", "mapped"),
    [
        ("ROLE_SYSTEM", "system"),
        ("ROLE_USER", "user"),
        ("ROLE_ASSISTANT", "assistant"),
        ("ROLE_TOOL", "tool"),
        (0, "system"),
        (1, "user"),
        (2, "assistant"),
        (3, "tool"),
    ],
)
def test_role_names_and_integers_map_to_lowercase_roles(role: object, mapped: str) -> None:
    run = Run()
    run.msg(message(role=role, message_id="m1"))
    run.msg(assistant(message_id="m2"))
    assert only_turn(run)["new_messages"][0]["role"] == mapped


def test_content_parts_translate_by_the_key_present() -> None:
    run = Run()
    run.msg(
        message(
            role="ROLE_TOOL",
            message_id="m1",
            content=[
                {"text": "t"},
                {"reasoning": "r"},
                {"toolResult": {"toolCallId": "c1", "result": {"lines": [1, 2]}}},
            ],
        )
    )
    run.msg(assistant(message_id="m2"))
    assert only_turn(run)["new_messages"][0]["parts"] == [
        {"type": "text", "content": "t"},
        {"type": "reasoning", "content": "r"},
        {"type": "tool_call_response", "id": "c1", "result": {"lines": [1, 2]}},
    ]


def test_unknown_content_parts_are_skipped_and_counted() -> None:
    run = Run()
    out = run.msg(
        message(
            message_id="m1",
            content=[
                {"image": {"uri": "s3://x.png"}},
                {"text": "kept"},
                {"file": {"name": "a.pdf"}},
            ],
        )
    )
    run.msg(assistant(message_id="m2"))
    assert out.counts["parts_skipped"] == 2
    assert only_turn(run)["new_messages"][0]["parts"] == [{"type": "text", "content": "kept"}]
    assert not run.dead_letters


def test_tool_calls_follow_content_parts_in_order() -> None:
    run = Run()
    run.msg(
        assistant(
            text="calling",
            message_id="m1",
            tool_calls=[
                tool_call("c1", "read_file", '{"path": "a.py"}'),
                tool_call("c2", "edit_file", {"path": "b.py", "new": "x"}),
            ],
        )
    )
    parts = only_turn(run)["new_messages"][0]["parts"]
    assert parts == [
        {"type": "text", "content": "calling"},
        {"type": "tool_call", "id": "c1", "name": "read_file", "arguments": {"path": "a.py"}},
        {
            "type": "tool_call",
            "id": "c2",
            "name": "edit_file",
            "arguments": {"path": "b.py", "new": "x"},
        },
    ]


@pytest.mark.parametrize("arguments", ["not json", "[1, 2]", '"a string"', "42", "{"])
def test_tool_arguments_that_are_not_a_json_object_become_empty_and_are_counted(
    arguments: str,
) -> None:
    run = Run()
    out = run.msg(assistant(message_id="m1", tool_calls=[tool_call("c1", "x", arguments)]))
    assert only_turn(run)["tool_calls"][0]["arguments"] == {}
    assert out.counts["malformed_tool_arguments"] == 1
    assert not run.dead_letters


def test_finish_reason_empty_or_absent_becomes_null() -> None:
    run = Run()
    run.msg(message(role="ROLE_ASSISTANT", message_id="m1", finish=""))
    run.msg(message(role="ROLE_ASSISTANT", message_id="m2"))
    run.msg(assistant(message_id="m3", finish="length"))
    reasons = [m["finish_reason"] for m in only_turn(run)["new_messages"]]
    assert reasons == [None, None, "length"]


def test_unknown_message_fields_are_ignored() -> None:
    run = Run()
    run.msg(
        assistant(
            message_id="m1", usage={"inputTokens": 5}, model="x", clientContext={"ide": "vscode"}
        )
    )
    assert only_turn(run)["new_messages"][0]["role"] == "assistant"

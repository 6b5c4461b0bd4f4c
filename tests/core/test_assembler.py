"""SPEC §4: turns from messages, and decisions joined to them (unique-or-drop)."""

from __future__ import annotations

import hashlib

import orjson

from tests.factories import Run, assistant, decision, message, tool_call


def texts(turn: dict) -> list[str]:
    return [p["content"] for m in turn["new_messages"] for p in m["parts"] if p["type"] == "text"]


# -- turns --------------------------------------------------------------------------


def test_a_finished_assistant_message_emits_one_turn_of_the_pending_messages() -> None:
    run = Run()
    run.msg(message(text="u1", message_id="u1"))
    run.msg(message(role="ROLE_ASSISTANT", text="thinking", message_id="a0"))
    assert run.revisions == []
    run.msg(assistant(text="answer", message_id="a1"))
    (turn,) = run.revisions
    assert texts(turn) == ["u1", "thinking", "answer"]
    assert turn["inference_call_id"] == "a1"


def test_the_pending_list_is_cleared_after_a_turn() -> None:
    run = Run()
    run.msg(message(text="u1", message_id="u1"))
    run.msg(assistant(text="a1", message_id="a1"))
    run.msg(message(text="u2", message_id="u2"))
    run.msg(assistant(text="a2", message_id="a2"))
    assert texts(run.final()["a2"]) == ["u2", "a2"]


def test_only_assistant_messages_with_a_finish_reason_complete_a_turn() -> None:
    run = Run()
    run.msg(message(role="ROLE_USER", message_id="u1", finish="stop"))
    run.msg(message(role="ROLE_TOOL", message_id="t1", finish="stop"))
    run.msg(message(role="ROLE_ASSISTANT", message_id="a1", finish=""))
    assert run.revisions == []


def test_messages_are_in_sequence_order_when_all_have_one() -> None:
    run = Run()
    run.msg(message(text="second", message_id="b", sequence="2"))
    run.msg(message(text="first", message_id="a", sequence=1))
    run.msg(assistant(text="third", message_id="c", sequence="3"))
    assert texts(run.final()["c"]) == ["first", "second", "third"]


def test_messages_are_in_arrival_order_when_one_lacks_a_sequence() -> None:
    run = Run()
    run.msg(message(text="second", message_id="b", sequence="2"))
    run.msg(message(text="first", message_id="a"))
    run.msg(assistant(text="third", message_id="c", sequence="3"))
    assert texts(run.final()["c"]) == ["second", "first", "third"]


def test_a_pending_message_published_again_replaces_its_copy_in_place() -> None:
    run = Run()
    run.msg(message(text="u", message_id="u1"))
    run.msg(message(role="ROLE_ASSISTANT", text="stream…", message_id="a1"))
    run.msg(message(text="tool", message_id="t1"))
    run.msg(message(role="ROLE_ASSISTANT", text="streamed in full", message_id="a1"))
    run.msg(assistant(text="end", message_id="a2"))
    assert texts(run.final()["a2"]) == ["u", "streamed in full", "tool", "end"]


def test_the_final_copy_of_a_streamed_message_completes_the_turn() -> None:
    run = Run()
    run.msg(message(role="ROLE_ASSISTANT", text="part", message_id="a1", sequence=1))
    run.msg(assistant(text="partial then whole", message_id="a1", sequence=1))
    (turn,) = run.revisions
    assert texts(turn) == ["partial then whole"]


def test_sequence_identifies_a_message_without_message_id() -> None:
    run = Run()
    run.msg(message(text="v1", sequence="4"))
    run.msg(message(text="v2", sequence=4))
    run.msg(assistant(text="a", message_id="a1"))
    assert texts(run.final()["a1"]) == ["v2", "a"]


def test_a_message_without_identity_is_always_new() -> None:
    run = Run()
    run.msg(message(text="same"))
    run.msg(message(text="same"))
    run.msg(assistant(text="a", message_id="a1"))
    assert texts(run.final()["a1"]) == ["same", "same", "a"]


def test_a_message_already_emitted_is_a_counted_duplicate() -> None:
    run = Run()
    run.msg(message(text="u", message_id="u1"))
    run.msg(assistant(text="a", message_id="a1"))
    out_u = run.msg(message(text="u", message_id="u1"))
    out_a = run.msg(assistant(text="a", message_id="a1"))
    run.msg(assistant(text="b", message_id="a2"))
    assert (out_u.outcome, out_a.outcome) == ("duplicate", "duplicate")
    assert run.counts["duplicate:message"] == 2
    assert texts(run.final()["a2"]) == ["b"]
    assert len(run.revisions) == 2


def test_completion_joins_text_and_argument_strings_in_part_order() -> None:
    run = Run()
    run.msg(
        assistant(
            message_id="a1",
            content=[
                {"reasoning": "hidden"},
                {"text": "Editing."},
                {"text": ""},
                {"toolResult": {"toolCallId": "x", "result": "not output"}},
            ],
            tool_calls=[
                tool_call(
                    "c1",
                    "edit",
                    {"path": "a.py", "edits": [{"old": "x", "new": ""}, {"n": 3, "new": "z"}]},
                ),
                tool_call("c2", "run", '{"cmd": "pytest", "args": ["-q", ""]}'),
            ],
        )
    )
    assert run.final()["a1"]["completion"] == "Editing.\nx\nz\na.py\n-q\npytest"


def test_completion_is_empty_when_nothing_is_left() -> None:
    run = Run()
    run.msg(assistant(message_id="a1", content=[{"reasoning": "only thoughts"}]))
    assert run.final()["a1"]["completion"] == ""


def test_tool_calls_are_this_messages_tool_call_parts() -> None:
    run = Run()
    run.msg(assistant(message_id="a0", text="earlier", finish="", tool_calls=[tool_call("c0")]))
    run.msg(assistant(message_id="a1", tool_calls=[tool_call("c1"), tool_call("c2")]))
    assert [t["id"] for t in run.final()["a1"]["tool_calls"]] == ["c1", "c2"]


def test_inference_call_id_falls_back_to_sequence_then_content_hash() -> None:
    run = Run()
    run.msg(assistant(session="s9", message_id=None, sequence="12"))  # type: ignore[arg-type]
    raw = {"role": "ROLE_ASSISTANT", "content": [{"text": "hashed"}], "finishReason": "stop"}
    run.msg({"conversationId": "s9", "message": raw})
    digest = hashlib.sha256(orjson.dumps(raw, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]
    assert list(run.final()) == ["s9:seq:12", f"s9:sha256:{digest}"]


def test_an_identityless_final_message_redelivered_is_a_duplicate() -> None:
    run = Run()
    raw = {"role": "ROLE_ASSISTANT", "content": [{"text": "hashed"}], "finishReason": "stop"}
    run.msg({"conversationId": "s1", "message": raw})
    out = run.msg({"conversationId": "s1", "message": raw})
    assert out.outcome == "duplicate" and len(run.revisions) == 1


def test_input_keys_are_not_trusted_sessions_come_from_the_value() -> None:
    run = Run()
    run.msg(message(session="s1", text="u", message_id="u1"), key=b"s2")
    run.msg(assistant(session="s1", message_id="a1"), key=None)
    run.dec(decision(session="s1", call_id="a1"), key=b"garbage")
    assert texts(run.final()["a1"]) == ["u", "done"]
    assert len(run.final()["a1"]["decisions"]) == 1


def test_sessions_do_not_share_state() -> None:
    run = Run()
    run.msg(message(session="s1", text="one", message_id="u1"))
    run.msg(message(session="s2", text="two", message_id="u1"))
    run.msg(assistant(session="s2", text="a", message_id="a2"))
    run.dec(decision(session="s1", call_id="a2"))
    assert texts(run.final()["a2"]) == ["two", "a"]
    assert run.final()["a2"]["decisions"] == []


# -- decisions join turns -----------------------------------------------------------


def test_a_decision_before_its_turn_waits_and_is_in_the_turn() -> None:
    run = Run()
    run.dec(decision(call_id="toolu_1"))
    run.msg(assistant(message_id="a1", tool_calls=[tool_call("toolu_1")]))
    (turn,) = run.revisions
    assert [d["decision_id"] for d in turn["decisions"]] == ["d1"]


def test_a_decision_after_its_turn_emits_the_complete_turn_again() -> None:
    run = Run()
    run.msg(message(text="u", message_id="u1"))
    run.msg(assistant(message_id="a1", tool_calls=[tool_call("toolu_1")]))
    out = run.dec(decision(call_id="toolu_1"))
    first, second = run.revisions
    assert second == first | {"decisions": second["decisions"]}
    assert [d["decision_id"] for d in second["decisions"]] == ["d1"]
    assert out.counts["turn_revisions"] == 1 and out.turns[0].key == '["s1","a1"]'


def test_decisions_join_by_inference_call_id_too() -> None:
    run = Run()
    run.msg(assistant(message_id="chatcmpl-1"))
    run.dec(decision(call_id="chatcmpl-1", harness="pi"))
    assert len(run.final()["chatcmpl-1"]["decisions"]) == 1


def test_decisions_are_ordered_by_occurred_at_instant_then_decision_id() -> None:
    run = Run()
    run.msg(assistant(message_id="a1"))
    run.dec(
        decision(
            call_id="a1",
            harness="pi",
            decision_id="b",
            file_path="1",
            occurred_at="2026-01-01T10:00:00Z",
        )
    )
    run.dec(
        decision(
            call_id="a1",
            harness="pi",
            decision_id="c",
            file_path="2",
            occurred_at="2026-01-01T11:30:00+02:00",
        )
    )
    run.dec(
        decision(
            call_id="a1",
            harness="pi",
            decision_id="a",
            file_path="3",
            occurred_at="2026-01-01T10:00:00Z",
        )
    )
    assert [d["decision_id"] for d in run.final()["a1"]["decisions"]] == ["c", "a", "b"]


def test_a_decision_without_call_id_is_unattributable() -> None:
    run = Run()
    run.msg(assistant(message_id="a1"))
    out = run.dec(decision(call_id=None))
    assert out.dead_letters[0]["reason"] == "unattributable_decision"
    assert "call_id" in out.dead_letters[0]["error"]
    assert run.final()["a1"]["decisions"] == []


def test_a_decision_reaching_two_turns_is_ambiguous() -> None:
    run = Run()
    run.msg(assistant(message_id="a1", tool_calls=[tool_call("shared")]))
    run.msg(assistant(message_id="a2", tool_calls=[tool_call("shared")]))
    out = run.dec(decision(call_id="shared"))
    assert out.dead_letters[0]["reason"] == "ambiguous_decision"
    assert "'a1'" in out.dead_letters[0]["error"] and "'a2'" in out.dead_letters[0]["error"]
    assert all(t["decisions"] == [] for t in run.final().values())


def test_a_decision_joined_on_a_guess_leaves_when_a_second_turn_shares_its_id() -> None:
    run = Run()
    run.dec(decision(call_id="shared", raw={"password": "hunter2"}))
    run.msg(assistant(message_id="a1", tool_calls=[tool_call("shared")]))
    assert len(run.final()["a1"]["decisions"]) == 1
    run.msg(assistant(message_id="a2", tool_calls=[tool_call("shared")]))
    (letter,) = run.dead_letters
    assert letter["reason"] == "ambiguous_decision" and letter["offset"] == 0
    assert "hunter2" not in letter["value"]
    assert run.final()["a1"]["decisions"] == [] and run.final()["a2"]["decisions"] == []


def test_a_decision_joins_only_turns_of_its_own_session() -> None:
    run = Run()
    run.msg(assistant(session="s1", message_id="a1", tool_calls=[tool_call("c")]))
    run.msg(assistant(session="s2", message_id="a2", tool_calls=[tool_call("c")]))
    run.dec(decision(session="s2", call_id="c"))
    assert len(run.final()["a2"]["decisions"]) == 1
    assert not run.dead_letters


def test_a_source_record_read_again_after_a_crash_changes_nothing() -> None:
    run = Run()
    run.msg(message(text="no identity"))
    run.offset -= 1  # the same record, same offset: a worker re-reading from its commit
    again = run.msg(message(text="no identity"))
    run.msg(assistant(message_id="a1"))
    assert again.outcome == "duplicate" and again.counts["reprocessed"] == 1
    assert texts(run.final()["a1"]) == ["no identity", "done"]

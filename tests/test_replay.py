"""SPEC §7: ``stream-app replay`` over a file, as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.contracts import assert_valid_turn, assert_valid_turn_key, validator

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "session.jsonl"


def replay(
    tmp_path: Path, source: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``stream-app replay`` of ``source`` into ``t.jsonl`` and ``d.jsonl`` in ``tmp_path``;
    ``env``: settings added to this process's environment."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "stream_app",
            "replay",
            str(source),
            "--out",
            str(tmp_path / "t.jsonl"),
            "--dlq",
            str(tmp_path / "d.jsonl"),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


def lines(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_replay_of_the_example_session(tmp_path: Path) -> None:
    done = replay(tmp_path, EXAMPLE)
    assert done.returncode == 0, done.stderr
    turns = lines(tmp_path / "t.jsonl")
    # The session, then its retry: a fork of it at the file read whose edit was rejected.
    sessions = ["sess-7f3a"] * 5 + ["sess-7f3a-retry"] * 3
    assert len(turns) == len(sessions)
    for line, session in zip(turns, sessions, strict=True):
        # the worker's record key, as text: the JSON pair [session id, inference_call_id]
        assert line["key"] == orjson.dumps([session, line["value"]["inference_call_id"]]).decode()
        assert_valid_turn_key(line["key"].encode(), line["value"], session)
        assert_valid_turn(line["value"])
    calls = [orjson.loads(k["key"])[1] for k in turns]
    assert calls == ["msg-a1", "msg-a2", "msg-a3", "msg-a4", "msg-a4", "msg-a1", "msg-b2", "msg-b2"]
    final = {orjson.loads(line["key"])[1]: line["value"] for line in turns[:5]}
    retry = {orjson.loads(line["key"])[1]: line["value"] for line in turns[5:]}
    # The fork copies the history up to the file read; its edit is another, rejected after
    # its turn (a second revision): the pair that a dpo export makes.
    assert retry["msg-a1"]["new_messages"] == final["msg-a1"]["new_messages"]
    assert [(d["decision_id"], d["accepted"]) for d in retry["msg-b2"]["decisions"]] == [
        ("dec-110", False)
    ]
    # joined by tool-use id before the turn; the redelivery collapsed into it
    assert [d["decision_id"] for d in final["msg-a2"]["decisions"]] == ["dec-100"]
    # joined by inference call id after the turn, as a second revision
    assert [d["decision_id"] for d in final["msg-a4"]["decisions"]] == ["dec-101"]
    assert final["msg-a1"]["new_messages"][2]["parts"][0] == {
        "type": "reasoning",
        "content": "The bug is probably in the slice bounds of paginate().",
    }
    out = (tmp_path / "t.jsonl").read_text()
    assert "sk-ant-api03" not in out and "eyJhbGciOiJIUzI1NiJ9" not in out

    letters = lines(tmp_path / "d.jsonl")
    for letter in letters:
        assert validator("dead-letter.v1.json").is_valid(letter)
    assert sorted(d["reason"] for d in letters) == [
        "invalid_json",
        "schema",
        "tenant_mismatch",
        "unattributable_decision",
    ]
    assert "1 duplicate decision;" in done.stderr and "6 turns emitted" in done.stderr


def test_a_string_value_is_replayed_as_the_raw_record(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(
        '{"topic": "messages", "key": "k", "value": "{\\"conversationId\\": \\"s\\", '
        '\\"message\\": {\\"role\\": 2, \\"messageId\\": \\"a\\", \\"finishReason\\": \\"stop\\", '
        '\\"content\\": [{\\"text\\": \\"hi\\"}]}}"}\n'
        '{"topic": "decisions", "key": null, "value": "not json at all"}\n'
    )
    assert replay(tmp_path, source).returncode == 0
    assert [t["key"] for t in lines(tmp_path / "t.jsonl")] == ['["s","a"]']
    (letter,) = lines(tmp_path / "d.jsonl")
    assert (letter["reason"], letter["value"], letter["offset"], letter["key"]) == (
        "invalid_json",
        "not json at all",
        1,
        None,
    )
    assert letter["source_topic"] == "developer.decisions"


def test_lines_that_are_not_records_are_dead_lettered_not_fatal(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text('{"topic": "elsewhere", "value": {}}\n\nnot json\n')
    done = replay(tmp_path, source)
    assert done.returncode == 0
    letters = lines(tmp_path / "d.jsonl")
    assert [(d["reason"], d["offset"], d["source_topic"]) for d in letters] == [
        ("schema", 0, "replay-input"),
        ("invalid_json", 2, "replay-input"),
    ]


@pytest.mark.parametrize("name", ["missing.jsonl", "."])
def test_an_unreadable_input_is_a_one_line_error_and_exit_2(tmp_path: Path, name: str) -> None:
    done = replay(tmp_path, tmp_path / name)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "cannot read" in done.stderr


def test_org_id_option_sets_the_tenant(tmp_path: Path) -> None:
    done = replay(tmp_path, EXAMPLE, "--org-id", "globex")
    assert done.returncode == 0
    mismatched = [
        d["offset"] for d in lines(tmp_path / "d.jsonl") if d["reason"] == "tenant_mismatch"
    ]
    assert mismatched == [0, 11]  # the two records that named the org "default"


# -- issue 10: poison records end as dead letters that fit, never as a crash -----------

DLQ_CAP = 512 * 1024  # stream_app.core.dead_letter.DEAD_LETTER_MAX_BYTES


def deep(levels: int, kind: str = "dict") -> str:
    """JSON text of ``levels`` nested objects (or arrays), past what orjson writes (255)."""
    if kind == "dict":
        return '{"a":' * levels + '"x"' + "}" * levels
    return "[" * levels + '"x"' + "]" * levels


def poison_message(**fields: object) -> dict:
    msg = {"role": "ROLE_ASSISTANT", "messageId": "m1", "finishReason": "stop"}
    msg |= {"content": [{"text": "x"}]} | fields
    return {"conversationId": "s1", "message": msg}


def poison_decision(**fields: object) -> dict:
    d = {
        "decision_id": "d1",
        "session_id": "s1",
        "user_id": None,
        "agent_harness": "claude-code",
        "file_path": "a.py",
        "accepted": True,
        "explicit": True,
        "interaction_mode": "agent",
        "commit_sha": None,
        "call_id": "m1",
        "edit_retention_score": None,
        "observation_delay_ms": None,
        "occurred_at": "2026-01-01T10:00:00Z",
        "raw": {},
    }
    return d | fields


# (topic, value as raw record text, expected reason, error prefix, truncated)
POISON: list[tuple[str, str, str, str, bool]] = [
    (
        "decisions",
        orjson.dumps(poison_decision(occurred_at="0001-01-01T00:00:00Z")).decode(),
        "schema",
        "occurred_at: ",
        False,
    ),
    (
        "decisions",
        orjson.dumps(poison_decision(occurred_at="9999-12-31T23:59:59Z")).decode(),
        "schema",
        "occurred_at: ",
        False,
    ),
    (
        "decisions",
        orjson.dumps(poison_decision(raw={})).decode().replace('"raw":{}', '"raw":' + deep(300)),
        "schema",
        "raw: ",
        False,
    ),
    (
        "decisions",
        orjson.dumps(poison_decision(raw={}))
        .decode()
        .replace('"raw":{}', '"raw":' + deep(1000, "list")),
        "schema",
        "raw: ",
        False,
    ),
    (
        "messages",
        orjson.dumps(poison_message(toolCalls=[{"id": "c", "name": "n", "arguments": 0}]))
        .decode()
        .replace('"arguments":0', '"arguments":' + deep(300)),
        "schema",
        "message.toolCalls.0.arguments: ",
        False,
    ),
    (
        "messages",
        orjson.dumps(
            poison_message(
                toolCalls=[{"id": "c", "name": "n", "arguments": '{"a":' + deep(500, "list") + "}"}]
            )
        ).decode(),
        "schema",
        "message.toolCalls.0.arguments: ",
        False,
    ),
    (
        "messages",
        orjson.dumps(poison_message(content=[{"toolResult": {"toolCallId": "c", "result": 0}}]))
        .decode()
        .replace('"result":0', '"result":' + deep(1000)),
        "schema",
        "message.content.0.toolResult.result: ",
        False,
    ),
    (
        "messages",
        orjson.dumps(poison_message(sequence="99999999999999999999")).decode(),
        "schema",
        "message.sequence: ",
        False,
    ),
    (
        "messages",
        orjson.dumps(poison_message(sequence=0))
        .decode()
        .replace('"sequence":0', '"sequence":1e20'),
        "schema",
        "message.sequence: ",
        False,
    ),
    (
        "decisions",
        orjson.dumps(poison_decision(observation_delay_ms=0))
        .decode()
        .replace('"observation_delay_ms":0', '"observation_delay_ms":1e20'),
        "schema",
        "observation_delay_ms: ",
        False,
    ),
    (
        "decisions",
        orjson.dumps(poison_decision(session_id="s" * 1025)).decode(),
        "schema",
        "session_id: ",
        False,
    ),
    ("messages", "\x01" * 1_000_000, "invalid_json", "value is not JSON", True),
    (
        "messages",
        orjson.dumps(poison_message(role="ROLE_ROBOT", content=[{"text": '"' * 450_000}])).decode(),
        "schema",
        "message.role",
        True,
    ),
    (
        "messages",
        orjson.dumps(poison_message(content=[{"text": "y" * 2_000_000}])).decode(),
        "too_large",
        "value is ",
        True,
    ),
]


@pytest.fixture(scope="module")
def poisoned(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    tmp_path = tmp_path_factory.mktemp("poison")
    source = tmp_path / "in.jsonl"
    with source.open("wb") as f:
        for topic, value, *_ in POISON:
            f.write(orjson.dumps({"topic": topic, "key": "s1", "value": value}) + b"\n")
        # a healthy session after them: the poison changed nothing for it
        f.write(orjson.dumps({"topic": "messages", "key": "s1", "value": poison_message()}) + b"\n")
    return replay(tmp_path, source), tmp_path


@pytest.mark.parametrize("offset", range(len(POISON)))
def test_a_poison_record_is_a_dead_letter_that_fits_and_replay_goes_on(
    poisoned: tuple[subprocess.CompletedProcess[str], Path], offset: int
) -> None:
    done, tmp_path = poisoned
    assert done.returncode == 0, done.stderr[-2000:]
    _, _, reason, error, truncated = POISON[offset]
    raw_letters = (tmp_path / "d.jsonl").read_bytes().splitlines()
    assert len(raw_letters) == len(POISON)
    raw = raw_letters[offset]
    assert len(raw) <= DLQ_CAP
    letter = orjson.loads(raw)
    assert validator("dead-letter.v1.json").is_valid(letter)
    assert (letter["offset"], letter["reason"]) == (offset, reason), letter["error"]
    assert letter["error"].startswith(error)
    assert letter.get("truncated", False) is truncated
    (turn,) = lines(tmp_path / "t.jsonl")  # only the healthy record made a turn
    assert turn["key"] == '["s1","m1"]'


def test_a_value_given_as_json_nested_past_orjson_s_limit_is_a_dead_letter(
    tmp_path: Path,
) -> None:
    """A non-string value is re-serialized as the record's bytes, however deep it is."""
    value = orjson.dumps(poison_decision(raw={})).decode().replace('"raw":{}', '"raw":' + deep(900))
    source = tmp_path / "in.jsonl"
    source.write_text('{"topic": "decisions", "key": null, "value": ' + value + "}\n")
    done = replay(tmp_path, source)
    assert done.returncode == 0, done.stderr[-2000:]
    (letter,) = lines(tmp_path / "d.jsonl")
    assert (letter["reason"], letter["error"]) == (
        "schema",
        "raw: is nested more than 64 levels deep",
    )
    assert orjson.loads(letter["value"]) == orjson.loads(value)


def test_two_sessions_reusing_a_message_id_are_two_keys_in_replay(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    with source.open("wb") as f:
        for session in ("sess-A", 'sess-"B":\x00'):
            value = poison_message() | {"conversationId": session}
            value["message"] |= {"messageId": "A-final"}
            f.write(orjson.dumps({"topic": "messages", "key": session, "value": value}) + b"\n")
    assert replay(tmp_path, source).returncode == 0
    keys = [line["key"] for line in lines(tmp_path / "t.jsonl")]
    assert [orjson.loads(k) for k in keys] == [["sess-A", "A-final"], ['sess-"B":\x00', "A-final"]]
    for key in keys:
        assert validator("turn-key.v1.json").is_valid(orjson.loads(key))


def test_publish_and_replay_number_a_files_lines_one_way(tmp_path: Path) -> None:
    """Issue 43 item 4: publish names line N, replay's dead letter of that line says offset
    N - 1 (SPEC §7), blank lines counted in both, as docs/records.md states."""
    source = tmp_path / "in.jsonl"
    good = EXAMPLE.read_text().splitlines()[0]
    source.write_text(f"{good}\n\n{good}\nnot json\n")
    assert replay(tmp_path, source).returncode == 0
    (letter,) = lines(tmp_path / "d.jsonl")
    published = subprocess.run(
        [sys.executable, "-m", "stream_app", "publish", str(source), "--strict"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    (said,) = [line for line in published.stderr.splitlines() if "invalid_json" in line]
    assert f"{source}:4: " in said and letter["offset"] == 3
    records_md = (ROOT / "docs" / "records.md").read_text()
    assert 'the dead letter of line 14 says\n`"offset": 13`' in records_md

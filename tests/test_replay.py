"""SPEC §7: ``stream-app replay`` over a file, as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.contracts import assert_valid_turn, validator

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "session.jsonl"


def replay(tmp_path: Path, source: Path, *extra: str) -> subprocess.CompletedProcess[str]:
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
        timeout=60,
        check=False,
    )


def lines(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_replay_of_the_example_session(tmp_path: Path) -> None:
    done = replay(tmp_path, EXAMPLE)
    assert done.returncode == 0, done.stderr
    turns = lines(tmp_path / "t.jsonl")
    for line in turns:
        assert line["key"] == line["value"]["inference_call_id"]
        assert_valid_turn(line["value"])
    final = {line["key"]: line["value"] for line in turns}
    assert list(final) == ["msg-a1", "msg-a2", "msg-a3", "msg-a4"]
    assert [k["key"] for k in turns] == ["msg-a1", "msg-a2", "msg-a3", "msg-a4", "msg-a4"]
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
    assert "1 duplicate decisions" in done.stderr and "4 turns emitted" in done.stderr


def test_a_string_value_is_replayed_as_the_raw_record(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(
        '{"topic": "messages", "key": "k", "value": "{\\"conversationId\\": \\"s\\", '
        '\\"message\\": {\\"role\\": 2, \\"messageId\\": \\"a\\", \\"finishReason\\": \\"stop\\", '
        '\\"content\\": [{\\"text\\": \\"hi\\"}]}}"}\n'
        '{"topic": "decisions", "key": null, "value": "not json at all"}\n'
    )
    assert replay(tmp_path, source).returncode == 0
    assert [t["key"] for t in lines(tmp_path / "t.jsonl")] == ["a"]
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

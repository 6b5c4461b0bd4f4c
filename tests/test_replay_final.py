"""SPEC §8, replay: ``--final-out`` writes every turn once, its latest revision byte for byte,
in the order the turns were first emitted."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson

from bench.workload import generate
from tests.contracts import assert_valid_turn
from tests.test_replay import replay as replay_to_files

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "session.jsonl"


def replay(tmp_path: Path, source: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """test_replay's replay, the final records written to ``final.jsonl``."""
    return replay_to_files(tmp_path, source, "--final-out", str(tmp_path / "final.jsonl"), env=env)


def key_and_value(line: bytes) -> tuple[str, bytes]:
    """A TURNS line's key, and its value's bytes as written."""
    key = orjson.loads(line)["key"]
    return key, line[line.index(b',"value":') + len(b',"value":') : -1]


def assert_final_lines(tmp_path: Path) -> list[str]:
    """The FINAL file against the TURNS file; returns its keys."""
    latest: dict[str, bytes] = {}
    first: list[str] = []
    for line in (tmp_path / "t.jsonl").read_bytes().splitlines():
        key, value = key_and_value(line)
        if key not in latest:
            first.append(key)
        latest[key] = value
    finals = [key_and_value(line) for line in (tmp_path / "final.jsonl").read_bytes().splitlines()]
    assert [key for key, _ in finals] == first  # once each, in first-emission order
    for key, value in finals:
        assert value == latest[key]  # the latest revision, byte for byte
        assert_valid_turn(orjson.loads(value))
    return first


def test_the_examples_turns_are_each_final_once_at_the_end(tmp_path: Path) -> None:
    done = replay(tmp_path, EXAMPLE)
    assert done.returncode == 0, done.stderr
    keys = assert_final_lines(tmp_path)
    assert [tuple(orjson.loads(k)) for k in keys] == [
        ("sess-7f3a", "msg-a1"),
        ("sess-7f3a", "msg-a2"),
        ("sess-7f3a", "msg-a3"),
        ("sess-7f3a", "msg-a4"),
        ("sess-7f3a-retry", "msg-a1"),
        ("sess-7f3a-retry", "msg-b2"),
    ]
    assert "6 turns emitted, 2 revisions, 6 final" in done.stderr


def test_turns_closed_early_by_a_limit_keep_their_place_in_the_final_file(tmp_path: Path) -> None:
    source = tmp_path / "workload.jsonl"
    source.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in generate(3_000, 40)))
    done = replay(tmp_path, source, STREAM_APP_MAX_OPEN_TURNS="2")
    assert done.returncode == 0, done.stderr
    assert len(assert_final_lines(tmp_path)) > 100

"""Issue 49 item 4: replay leaves no record in no output and no count.

``--final-out`` takes the end of the input for the end of every session: as at a worker's
session expiry, a decision still waiting for its turn is an ``orphaned_decision`` dead letter
and the pending messages no finishing message closed are dropped and counted. Without it the
sessions stay open, and the summary counts what still waits. Either way the summary's
equation accounts for every record read: read = in turns + duplicates + replaced + in dead
letters + dropped (+ waiting); the figures are checked here against the files themselves.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.workload import generate
from tests.factories import ORG, assistant, decision, message
from tests.test_replay import replay

EQUATION = re.compile(
    r"(\d+) records? read = (\d+) in turns \+ (\d+) duplicates? \+ (\d+) replaced by a later "
    r"copy \+ (\d+) in dead letters \+ (\d+) dropped"
    r"(?: \+ (\d+) waiting \((\d+) messages?, (\d+) decisions?\))?; "
)


def _line(topic: str, value: Any) -> bytes:
    return orjson.dumps({"topic": topic, "key": None, "value": value})


def _summary(stderr: str) -> str:
    (line,) = [s for s in stderr.splitlines() if ": warning: " not in s]
    return line


def _equation(stderr: str) -> dict[str, int]:
    found = EQUATION.search(_summary(stderr))
    assert found is not None, _summary(stderr)
    names = ["read", "turns", "duplicates", "replaced", "letters", "dropped", "waiting"]
    figures = {n: int(v) for n, v in zip(names, found.groups(), strict=False) if v is not None}
    waiting = found.group(7)
    if waiting is not None:
        assert int(waiting) == int(found.group(8)) + int(found.group(9))
    assert figures["read"] == sum(v for n, v in figures.items() if n != "read")
    return figures


def _held(turn: dict[str, Any]) -> int:
    """The records a turn holds: its messages and its decisions."""
    return len(turn["new_messages"]) + len(turn["decisions"])


def _three_orphans_and_an_open_message() -> list[bytes]:
    """The issue's case: 7 messages making 3 turns and leaving 1 pending, and 3 decisions
    for a call no turn answers to."""
    lines = []
    for n in (1, 2, 3):
        lines.append(_line("messages", message("s", text=f"question {n}", message_id=f"u{n}")))
        lines.append(_line("messages", assistant("s", message_id=f"a{n}")))
        lines.append(
            _line("decisions", decision("s", call_id=f"never-{n}", decision_id=f"d{n}", org_id=ORG))
        )
    lines.append(_line("messages", message("s", text="left open", message_id="u4")))
    return lines


def test_the_end_of_the_input_orphans_waiting_decisions_and_counts_dropped_messages(
    tmp_path: Path,
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\n".join(_three_orphans_and_an_open_message()) + b"\n")
    done = replay(tmp_path, source, "--org-id", ORG, "--final-out", str(tmp_path / "f.jsonl"))
    assert done.returncode == 0, done.stderr
    letters = [orjson.loads(x) for x in (tmp_path / "d.jsonl").read_bytes().splitlines()]
    assert [(x["reason"], x["offset"]) for x in letters] == [
        ("orphaned_decision", 2),
        ("orphaned_decision", 5),
        ("orphaned_decision", 8),
    ]
    assert "before the end of the input" in letters[0]["error"]
    assert orjson.loads(letters[0]["value"])["decision_id"] == "d1"
    finals = [orjson.loads(x) for x in (tmp_path / "f.jsonl").read_bytes().splitlines()]
    assert sum(_held(f["value"]) for f in finals) == 6
    summary = _summary(done.stderr)
    assert "3 dead letters (orphaned_decision 3)" in summary
    assert (
        "10 records read = 6 in turns + 0 duplicates + 0 replaced by a later copy + "
        "3 in dead letters + 1 dropped; "
    ) in summary
    # Without --final-out the sessions stay open: what waits is said, and counted.
    done = replay(tmp_path, source, "--org-id", ORG)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "d.jsonl").read_bytes() == b""
    assert (
        "10 records read = 6 in turns + 0 duplicates + 0 replaced by a later copy + "
        "0 in dead letters + 0 dropped + 4 waiting (1 message, 3 decisions); "
    ) in _summary(done.stderr)


@pytest.mark.parametrize("seed", [49, 6])
def test_every_record_of_a_random_mix_is_accounted_for_by_the_files(
    tmp_path: Path, seed: int
) -> None:
    """A generated mix (tool loops, streamed-then-final messages, decisions before and after
    their turns, redeliveries, malformed records): the equation's figures are the files'."""
    source = tmp_path / "mix.jsonl"
    source.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in generate(400, 12, seed)))
    read = len(source.read_bytes().splitlines())
    done = replay(tmp_path, source, "--final-out", str(tmp_path / "f.jsonl"))
    assert done.returncode == 0, done.stderr
    figures = _equation(done.stderr)
    assert "waiting" not in figures and figures["read"] == read
    finals = [orjson.loads(x) for x in (tmp_path / "f.jsonl").read_bytes().splitlines()]
    assert figures["turns"] == sum(_held(f["value"]) for f in finals)
    letters = [orjson.loads(x) for x in (tmp_path / "d.jsonl").read_bytes().splitlines()]
    assert figures["letters"] == len(letters)
    orphaned = sum(x["reason"] == "orphaned_decision" for x in letters)
    assert orphaned > 0 and figures["dropped"] > 0  # the mix leaves both at its end

    # Without --final-out: the same records, what was orphaned and dropped now waiting.
    open_ = replay(tmp_path, source)
    assert open_.returncode == 0, open_.stderr
    still = _equation(open_.stderr)
    latest: dict[str, dict[str, Any]] = {}
    for line in (tmp_path / "t.jsonl").read_bytes().splitlines():
        doc = orjson.loads(line)
        latest[doc["key"]] = doc["value"]
    assert still["turns"] == sum(_held(t) for t in latest.values()) == figures["turns"]
    assert still["letters"] == figures["letters"] - orphaned
    assert still["waiting"] == orphaned + figures["dropped"] and still["dropped"] == 0

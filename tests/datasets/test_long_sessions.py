"""Issue 52 item 7 for one long session: its turns are read one at a time, and a history
over ``--max-example-bytes`` is let go (its later turns ``too_large``), so memory follows
the largest example written, not the session's length."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import orjson

from stream_app.datasets.files import write_dataset
from stream_app.datasets.options import Options
from stream_app.datasets.turn_lines import read_turn_lines
from tests.datasets.test_verdicts import verdict_turns

LIMIT = 64 * 1024


def long_session(turns: int) -> list[bytes]:
    """One session of ``turns`` turns, each a 1 KB user message and a text answer."""
    base = orjson.loads(verdict_turns().splitlines()[0])["value"]
    completing = next(m for m in base["new_messages"] if m["finish_reason"] is not None)
    user = next(m for m in base["new_messages"] if m["role"] == "user")
    lines = []
    for i in range(turns):
        asked = {**user, "parts": [{"type": "text", "content": "x" * 1000}]}
        answer = {
            **completing,
            "finish_reason": "stop",
            "parts": [{"type": "text", "content": "ok"}],
        }
        value = {
            **base,
            "inference_call_id": f"a{i}",
            "new_messages": [asked, answer],
            "decisions": [],
        }
        lines.append(orjson.dumps({"key": orjson.dumps(["s", f"a{i}"]).decode(), "value": value}))
    return lines


def peak_of(form: str, turns: int, out: Path) -> tuple[int, dict[str, int], int]:
    read = read_turn_lines(long_session(turns))
    options = Options(format=form, max_example_bytes=LIMIT)  # type: ignore[arg-type]
    tracemalloc.start()
    manifest = write_dataset(read, options, out, "t")
    _, top = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return top, manifest["skipped"], sum(manifest["split"]["records"].values())


def test_a_session_longer_than_the_limit_is_not_held_whole(tmp_path: Path) -> None:
    short, skipped, written = peak_of("chat", 200, tmp_path / "a.jsonl")
    assert 0 < written < 200 and written + skipped["too_large"] == 200
    long, skipped, written_long = peak_of("chat", 800, tmp_path / "b.jsonl")
    assert written_long == written and skipped["too_large"] == 800 - written
    assert long < short + 512 * 1024, (short, long)  # held whole, 4x the turns grew it 4x


def test_each_example_that_fits_is_written_and_every_later_one_is_too_large(
    tmp_path: Path,
) -> None:
    """The examples written are those whose history fits: each line at most the limit."""
    for form in ("chat", "kto", "trajectories"):
        _, skipped, written = peak_of(form, 200, tmp_path / f"{form}.jsonl")
        path = tmp_path / f"{form}.jsonl"
        lines = path.read_bytes().splitlines() if path.exists() else []  # none: no file
        assert len(lines) == written and all(len(line) < LIMIT for line in lines)
        if form == "chat":
            assert skipped["too_large"] == 200 - written
        if form == "kto":  # no verdicts: nothing written, none read past the limit
            assert skipped["too_large"] + skipped["no_verdict"] == 200
        if form == "trajectories":  # the session is one line, over the limit
            assert written == 0 and skipped["too_large"] == 200

"""Issue 52 item 7: memory bounded by the largest example plus a constant. The reader keeps
an index (each key's latest line by position), never the lines; a line over
``--max-example-bytes`` is passed by in chunks, not loaded; dpo keeps positions, not turns."""

from __future__ import annotations

import io
from pathlib import Path

import orjson

from stream_app.datasets.files import write_dataset
from stream_app.datasets.options import Options
from stream_app.datasets.skips import SkipReason
from stream_app.datasets.turn_lines import CHUNK_BYTES, read_turn_lines, read_turns_file
from tests.datasets.test_verdicts import verdict_turns


class _Reads(io.BytesIO):
    """A file that remembers the largest read asked of it."""

    largest = 0

    def readline(self, size: int | None = -1, /) -> bytes:
        got = super().readline(size)
        self.largest = max(self.largest, len(got))
        return got


def test_a_line_over_the_limit_is_skipped_without_being_loaded(tmp_path: Path) -> None:
    turns = verdict_turns().splitlines(keepends=True)
    key = orjson.loads(turns[-1])["key"]
    other = orjson.loads(turns[0])["key"]
    huge = b'{"key":' + orjson.dumps(key) + b',"value":"' + b"x" * (8 * CHUNK_BYTES) + b'"}\n'
    source = _Reads(b"".join(turns) + huge + turns[0])
    limit = 256 * 1024
    read = read_turns_file(source, max_bytes=limit)
    assert source.largest <= max(limit + 1, CHUNK_BYTES) < len(huge)
    assert read.where(key) == SkipReason.TOO_LARGE  # named by its key, read from its head
    assert isinstance(read.where(other), tuple)  # the line after it read as ever
    assert read.records == len(turns) + 2
    options = Options(format="turns", max_example_bytes=limit)
    manifest = write_dataset(read, options, tmp_path / "t.jsonl", "t")
    assert manifest["skipped"]["too_large"] == 1
    assert manifest["skipped_turns"][0] == {"key": key, "reason": "too_large"}


def test_the_index_holds_positions_not_lines() -> None:
    read = read_turn_lines(verdict_turns().splitlines())
    places = [where for _, where in read.entries()]
    assert places
    assert all(isinstance(where, tuple) for where in places)
    assert read.source is not None
    first = places[0]
    assert isinstance(first, tuple)
    assert read.line(first).startswith(b'{"key":')


def test_dpo_pairs_from_its_spool_are_the_pairs_of_the_turns(tmp_path: Path) -> None:
    """dpo keeps each turn's answer in a spool file and reads it back when it pairs it: the
    rows hold the turns' own messages, and the same input gives the same bytes."""
    turns = verdict_turns()
    one = write_dataset(
        read_turn_lines(turns.splitlines()), Options(format="dpo"), tmp_path / "a.jsonl", "t"
    )
    two = write_dataset(
        read_turn_lines(turns.splitlines()), Options(format="dpo"), tmp_path / "b.jsonl", "t"
    )
    assert one["files"][0]["records"] > 0
    assert one["files"][0]["sha256"] == two["files"][0]["sha256"]
    rows = [orjson.loads(x) for x in (tmp_path / "a.jsonl").read_bytes().splitlines()]
    meta = [orjson.loads(x) for x in (tmp_path / "a.metadata.jsonl").read_bytes().splitlines()]
    by_call = {}
    for line in turns.splitlines():
        doc = orjson.loads(line)
        by_call[doc["value"]["inference_call_id"]] = doc["value"]
    for row, m in zip(rows, meta, strict=True):
        for side in ("chosen", "rejected"):
            turn = by_call[m[side]["inference_call_id"]]
            texts = [
                p["content"]
                for msg in turn["new_messages"]
                if msg["role"] == "assistant" and msg["finish_reason"]
                for p in msg["parts"]
                if p["type"] == "text" and p["content"]
            ]
            assert row[side][0]["content"] == "\n".join(texts)

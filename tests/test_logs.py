"""Event log lines: JSON for machines, key=value on a terminal."""

from __future__ import annotations

import io

import orjson

from stream_app import logs


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_event_lines_are_json_when_not_on_a_terminal() -> None:
    out = io.StringIO()
    logs.configure(out)
    logs.event("dead_letter", reason="schema", offset=17)
    line = orjson.loads(out.getvalue())
    assert (line["event"], line["level"], line["reason"], line["offset"]) == (
        "dead_letter",
        "info",
        "schema",
        17,
    )
    assert line["ts"].endswith("Z")


def test_event_lines_are_readable_on_a_terminal() -> None:
    out = Terminal()
    logs.configure(out)
    logs.event("partitions_assigned", partitions=["s:0", "s:1"])
    text = out.getvalue()
    assert "partitions_assigned" in text and "partitions=['s:0', 's:1']" in text
    assert not text.startswith("{")

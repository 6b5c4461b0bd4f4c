"""``stream-app replay`` takes telemetry lines (SPEC §10): a captured OTLP export replays as
the worker would translate it, its verdicts joining their turns, every log record accounted
for in the summary."""

from __future__ import annotations

import io
from typing import Any

import orjson

from stream_app.cli.replay import replay, summary
from stream_app.config import Settings
from stream_app.ingest import otlp
from tests.ingest.message_lines import a_turn
from tests.ingest.otlp_records import (
    CLAUDE_RESOURCE,
    claude_api_request,
    claude_code,
    codex,
    request,
)


def telemetry(req: Any) -> dict[str, Any]:
    return {"topic": "telemetry", "value": orjson.loads(otlp.encode_json(req))}


def run(lines: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    turns, dlq = io.BytesIO(), io.BytesIO()
    data = [orjson.dumps(line) + b"\n" for line in lines]
    counts = replay(data, Settings(org_id="acme"), turns, dlq)
    latest = {}
    for line in turns.getvalue().splitlines():
        doc = orjson.loads(line)
        latest[doc["key"]] = doc["value"]
    letters = [orjson.loads(line) for line in dlq.getvalue().splitlines()]
    return latest, letters, summary(counts)


def test_telemetry_lines_join_their_turns_and_are_accounted_for() -> None:
    export = request(
        [
            claude_code("sess-r", "toolu_r", "reject", "user_reject"),
            claude_api_request("sess-r"),
            claude_code("sess-r", "toolu_x", "maybe"),
        ],
        CLAUDE_RESOURCE,
    )
    lines = [
        *a_turn("sess-r", "msg-r", "toolu_r"),
        *a_turn("conv-r", "msg-c", "call_r"),
        telemetry(export),
        telemetry(request([codex("conv-r", "call_r", "approved")])),
        telemetry(export),  # the same export again: a counted duplicate
        {"topic": "telemetry", "value": {"resourceLogs": 3}},
    ]
    turns, letters, said = run(lines)
    (cc,) = turns['["sess-r","msg-r"]']["decisions"]
    assert (cc["accepted"], cc["explicit"], cc["call_id"]) == (False, True, "toolu_r")
    (cx,) = turns['["conv-r","msg-c"]']["decisions"]
    assert cx["agent_harness"] == "codex" and cx["accepted"] is True
    reasons = sorted(letter["reason"] for letter in letters)
    assert reasons == ["invalid_otlp", "untranslatable_telemetry", "untranslatable_telemetry"]
    assert "4 telemetry lines: 7 log records = 3 translated + 2 ignored + 2 untranslatable" in said
    assert "(1 not OTLP)" in said
    assert "!=" not in said, said
    assert "1 duplicate decision" in said


def test_a_file_without_telemetry_lines_says_nothing_of_it() -> None:
    _, _, said = run(a_turn("s", "m", "c"))
    assert "telemetry" not in said

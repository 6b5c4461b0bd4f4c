"""``stream-app publish`` without a broker: what it sends where, and what it refuses (issue 12).

The round trip through a broker and a worker is in ``tests/test_publish_export.py``.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from stream_app.broker.embedded import free_port
from stream_app.cli.replay import replay
from stream_app.config import Settings
from stream_app.ingest.publish import Outgoing, Rejected, check
from tests.factories import assistant, decision, message

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "session.jsonl"
# Dead letters the worker writes from state, not at intake: publish cannot know them.
FROM_STATE = {"unattributable_decision", "ambiguous_decision", "orphaned_decision"}


def settings(**fields: Any) -> Settings:
    return Settings(org_id="acme", **fields)


def line(topic: str, value: Any, key: str | None = "k") -> bytes:
    return orjson.dumps({"topic": topic, "key": key, "value": value})


def test_records_are_keyed_by_their_session_whatever_the_line_says() -> None:
    checked = list(
        check(
            [
                line("messages", message("sess-1"), key="wrong"),
                line("decisions", decision("sess-2"), key=None),
            ],
            settings(topic_messages="in.m", topic_decisions="in.d"),
        )
    )
    assert checked == [
        Outgoing(1, "messages", "in.m", b"sess-1", orjson.dumps(message("sess-1"))),
        Outgoing(2, "decisions", "in.d", b"sess-2", orjson.dumps(decision("sess-2"))),
    ]


def test_the_original_bytes_are_sent_not_a_normalized_copy() -> None:
    raw = '{"conversationId": "s", "message": {"role": 1, "content": [{"text": "x"}]}, "z": 1}'
    (out,) = check([line("messages", raw)], settings())
    assert isinstance(out, Outgoing) and out.value == raw.encode()


@pytest.mark.parametrize(
    ("given", "reason", "names"),
    [
        (b"{not json", "invalid_json", "line is not JSON"),
        (line("users", message()), "schema", "topic"),
        (orjson.dumps({"topic": "messages", "key": "k"}), "schema", "value: is required"),
        (line("messages", "{trunc"), "invalid_json", "value is not JSON"),
        (line("messages", {"conversationId": "s", "message": {}}), "schema", "message.role"),
        (line("messages", message(role="ROLE_BOSS")), "schema", "message.role"),
        (line("decisions", decision(edit_retention_score=2)), "schema", "edit_retention_score"),
        (line("decisions", decision(occurred_at="yesterday")), "schema", "occurred_at"),
        (line("decisions", decision(org_id="Globex")), "tenant_mismatch", "org_id"),
        (line("messages", message(orgId="Globex")), "tenant_mismatch", "orgId"),
        (line("messages", message(conversationId="x" * 1025)), "schema", "conversationId"),
    ],
)
def test_a_bad_line_is_rejected_with_its_line_number_reason_and_field(
    given: bytes, reason: str, names: str
) -> None:
    good = line("messages", assistant(message_id="a"))
    checked = list(check([good, b"\n", given, good], settings()))
    assert [type(c) for c in checked] == [Outgoing, Rejected, Outgoing]
    rejected = checked[1]
    assert isinstance(rejected, Rejected)
    assert rejected.line == 3  # the blank line counts, as in an editor
    assert rejected.reason == reason
    assert names in rejected.error


def test_a_record_over_the_size_limit_is_rejected_as_the_worker_would() -> None:
    (rejected,) = check(
        [line("messages", message(text="x" * 2000))], settings(max_record_bytes=1000)
    )
    assert isinstance(rejected, Rejected) and rejected.reason == "too_large"


def test_publish_rejects_exactly_the_lines_replay_dead_letters_at_intake() -> None:
    config = Settings()  # the example's org is the default deployment's
    turns, dlq = io.BytesIO(), io.BytesIO()
    replay(EXAMPLE.read_bytes().splitlines(keepends=True), config, turns, dlq)
    letters = [orjson.loads(x) for x in dlq.getvalue().splitlines()]
    at_intake = {(d["offset"] + 1, d["reason"]) for d in letters if d["reason"] not in FROM_STATE}
    checked = list(check(EXAMPLE.read_bytes().splitlines(keepends=True), config))
    rejected = {(c.line, c.reason) for c in checked if isinstance(c, Rejected)}
    assert rejected == at_intake and len(rejected) == 3
    assert {c.key for c in checked if isinstance(c, Outgoing)} == {b"sess-7f3a", b"sess-7f3a-retry"}


def run_publish(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stream_app", "publish", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


def test_strict_refuses_a_file_with_a_bad_line_before_it_connects(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(line("messages", message()) + b"\n" + line("decisions", {}) + b"\n")
    # Nothing listens on this port: a refusal must not need the broker.
    done = run_publish(str(source), "--strict", "--bootstrap", f"127.0.0.1:{free_port()}")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith(f"stream-app publish: {source}:2: ")
    assert "decision_id" in lines[0] and "(schema)" in lines[0]
    assert lines[-1] == (
        "stream-app publish: refused: 1 line would be a dead letter; nothing sent (--strict)"
    )


def test_an_unreadable_file_or_no_broker_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = run_publish(str(tmp_path / "missing.jsonl"))
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "cannot read" in done.stderr
    source = tmp_path / "in.jsonl"
    source.write_bytes(line("messages", message()) + b"\n")
    done = run_publish(str(source), "--bootstrap", f"127.0.0.1:{free_port()}")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "no Kafka broker answers" in done.stderr


def test_export_without_a_broker_is_one_line_exit_2_and_no_file(tmp_path: Path) -> None:
    out = tmp_path / "turns.jsonl"
    nobody = f"127.0.0.1:{free_port()}"
    done = subprocess.run(
        [sys.executable, "-m", "stream_app", "export", "--out", str(out), "--bootstrap", nobody],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "no Kafka broker answers" in done.stderr
    assert list(tmp_path.iterdir()) == []  # neither the file nor a partial one


def test_a_telemetry_line_goes_to_the_telemetry_topic_as_replay_takes_it() -> None:
    """Issue 51: publish sends ``{"topic": "telemetry", "value": <OTLP JSON>}`` lines to the
    telemetry topic (unkeyed, as the Collector writes it), and refuses one that is no
    request, where it used to refuse every telemetry line as no input kind."""
    example = Path(__file__).resolve().parent.parent / "examples" / "telemetry.jsonl"
    (good,) = example.read_bytes().splitlines()
    bad = b'{"topic": "telemetry", "value": {"resourceLogs": 3}}'
    sent, refused = check([good, bad], settings())
    assert isinstance(sent, Outgoing) and sent.topic == "otlp_logs" and sent.key == b""
    assert orjson.loads(sent.value) == orjson.loads(good)["value"]
    assert isinstance(refused, Rejected) and refused.reason == "invalid_otlp"

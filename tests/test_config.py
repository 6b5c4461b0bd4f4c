"""Configuration from STREAM_APP_* variables; a bad value stops start-up with one line."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from stream_app.config import Settings, SettingsError, load_settings


def test_defaults_follow_the_spec_topic_names() -> None:
    s = Settings()
    assert (s.topic_messages, s.topic_decisions, s.topic_turns, s.topic_dlq) == (
        "llm.messages",
        "developer.decisions",
        "turns",
        "turns.dlq",
    )
    assert s.broker_url == "kafka://localhost:9092"
    assert s.max_record_bytes == 1024 * 1024


def test_every_setting_is_read_from_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    values = {
        "BROKER_URL": "kafka://k:1",
        "ID": "x",
        "ORG_ID": "Acme",
        "PARTITIONS": "8",
        "TOPIC_MESSAGES": "m",
        "TOPIC_DECISIONS": "d",
        "TOPIC_TURNS": "t",
        "TOPIC_DLQ": "q",
        "REPLICATION_FACTOR": "3",
        "SESSION_TTL_SECONDS": "60",
        "LATE_DECISION_WINDOW_SECONDS": "30",
        "MAX_RECORD_BYTES": "10",
        "WEB_PORT": "7000",
        "SESSION_TIMEOUT_SECONDS": "2",
        "HEARTBEAT_INTERVAL_SECONDS": "0.5",
        "REBALANCE_TIMEOUT_SECONDS": "3",
        "PRODUCER_MAX_BATCH_SIZE": "1",
        "FETCH_MAX_WAIT_MS": "20",
        "BATCH_MAX_RECORDS": "100",
        "COMMIT_INTERVAL_MS": "250",
        "SWEEP_INTERVAL_SECONDS": "5",
        "WEB_HOST": "10.0.0.7",
        "WEB_BIND": "127.0.0.1",
    }
    for name, value in values.items():
        monkeypatch.setenv(f"STREAM_APP_{name}", value)
    s = load_settings()
    dumped = {k.upper(): str(v) for k, v in s.model_dump().items()}
    for name, value in values.items():
        assert dumped[name] == value or float(dumped[name]) == float(value), name
    assert s.policy().org_id == "acme"


@pytest.mark.parametrize(
    ("name", "value"),
    [("PARTITIONS", "0"), ("WEB_PORT", "http"), ("MAX_RECORD_BYTES", "-1"), ("ORG_ID", "")],
)
def test_a_bad_value_is_one_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(f"STREAM_APP_{name}", value)
    with pytest.raises(SettingsError, match=f"^STREAM_APP_{name}: "):
        load_settings()


@pytest.mark.parametrize("command", [["worker"], ["replay", "x", "--out", "o", "--dlq", "d"]])
def test_commands_refuse_to_start_on_a_bad_setting(command: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stream_app", *command],
        env={**os.environ, "STREAM_APP_PARTITIONS": "none"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("stream-app: STREAM_APP_PARTITIONS: ")
    assert done.stderr.count("\n") == 1

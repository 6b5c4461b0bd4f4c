"""Configuration from STREAM_APP_* variables; a bad value stops start-up with one line."""

from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest

from stream_app import config
from stream_app.config import Settings, SettingsError, broker_hosts, load_settings


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
        "FINAL_TICK_SECONDS": "5",
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


# -- issue 23 item 2: configuration that refuses surprises --------------------------------


@pytest.fixture
def warnings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What load_settings warns about, in a process that has warned about nothing yet."""
    monkeypatch.setattr(config, "_warned", set())
    return []


@pytest.mark.parametrize(
    ("variable", "closest"),
    [
        ("STREAM_APP_BOOTSTRAP", "STREAM_APP_BROKER_URL"),
        ("STREAM_APP_BOOTSTRAP_SERVERS", "STREAM_APP_BROKER_URL"),
        ("STREAM_APP_PARTITION", "STREAM_APP_PARTITIONS"),
        ("STREAM_APP_WEBPORT", "STREAM_APP_WEB_PORT"),
        ("stream_app_topic_turn", "STREAM_APP_TOPIC_TURNS"),
    ],
)
def test_an_unknown_variable_is_warned_about_with_the_closest_setting(
    monkeypatch: pytest.MonkeyPatch, warnings: list[str], variable: str, closest: str
) -> None:
    monkeypatch.setenv(variable, "4")
    settings = load_settings(warn=warnings.append)
    assert settings == Settings()  # ignored: the default stands
    assert warnings == [f"{variable} is not a setting and is ignored (did you mean {closest}?)"]


def test_a_name_like_no_setting_is_warned_about_once_per_process(
    monkeypatch: pytest.MonkeyPatch, warnings: list[str]
) -> None:
    monkeypatch.setenv("STREAM_APP_ZZZ", "1")
    monkeypatch.setenv("STREAM_APP_PARTITIONS", "3")  # a setting: not warned about
    monkeypatch.setenv("OTHER_APP_BOOTSTRAP", "x")  # not ours
    load_settings(warn=warnings.append)
    load_settings(warn=warnings.append)  # as the worker does, then its app module
    assert warnings == [
        "STREAM_APP_ZZZ is not a setting and is ignored (no setting has a name like it)"
    ]


def test_a_command_warns_on_stderr_and_goes_on() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stream_app", "replay", "/nonexistent", "--out", "o", "--dlq", "d"],
        env={**os.environ, "STREAM_APP_BOOTSTRAP": "kafka:9092"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    warning, error = done.stderr.splitlines()
    assert warning == (
        "stream-app: warning: STREAM_APP_BOOTSTRAP is not a setting and is ignored "
        "(did you mean STREAM_APP_BROKER_URL?)"
    )
    assert error.startswith("stream-app replay: cannot read /nonexistent")  # it went on


@pytest.mark.parametrize(
    ("given", "bootstrap"),
    [
        ("kafka://k:9092", "k:9092"),
        ("k:9092", "k:9092"),
        ("kafka://a:1;kafka://b:2", "a:1,b:2"),
        ("a:1, b:2", "a:1,b:2"),
        ("KAFKA://[::1]:9092/", "[::1]:9092"),
        ("kafka://k", "k"),
    ],
)
def test_the_broker_url_takes_one_format_everywhere(
    monkeypatch: pytest.MonkeyPatch, given: str, bootstrap: str
) -> None:
    monkeypatch.setenv("STREAM_APP_BROKER_URL", given)
    settings = load_settings()
    assert settings.bootstrap_servers() == bootstrap
    # Faust's form for the worker's app, whichever was given.
    assert settings.broker_url == ";".join(f"kafka://{h}" for h in bootstrap.split(","))
    assert broker_hosts(given) == bootstrap.split(",")


def refused(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> str:
    """What refusing the settings with ``name`` set to ``value`` says."""
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as refusal:
        load_settings()
    return str(refusal.value)


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("http://x:1", "http:// is not a Kafka address"),
        ("kafka://x:70000", "'kafka://x:70000' is not a Kafka address"),
        ("x/topic", "'x/topic' is not a Kafka address"),
        (" ; ", "no broker given"),
    ],
)
def test_a_broker_url_that_is_not_a_kafka_address_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch, given: str, said: str
) -> None:
    message = refused(monkeypatch, "STREAM_APP_BROKER_URL", given)
    assert message.startswith(f"STREAM_APP_BROKER_URL: {said}")
    assert "host:port or kafka://host:port" in message and "\n" not in message


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("PARTITIONS", "0", "must be 1 or more (got '0')"),
        ("PARTITIONS", "four", "must be a whole number (got 'four')"),
        ("WEB_PORT", "70000", "must be 65535 or less (got '70000')"),
        ("SESSION_TTL_SECONDS", "0", "must be more than 0 (got '0')"),
        ("SESSION_TTL_SECONDS", "a day", "must be a number (got 'a day')"),
        ("COMPRESSION", "brotli", "must be none, gzip, lz4, zstd or snappy (got 'brotli')"),
        ("STORE", "redis://", "must be rocksdb:// or memory:// (got 'redis://')"),
        ("SECURITY_PROTOCOL", "TLS", "must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
        ("SASL_MECHANISM", "GSSAPI", "must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
        ("ORG_ID", "", "must not be empty (got '')"),
        ("SSL_CAFILE", "/nonexistent.pem", "no such file (got '/nonexistent.pem')"),
        ("WEB_TOKEN", "short", "at least 16 characters"),
    ],
)
def test_a_bad_value_is_said_in_the_users_words(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, said: str
) -> None:
    monkeypatch.setenv(f"STREAM_APP_{name}", value)
    with pytest.raises(SettingsError) as refused:
        load_settings()
    message = str(refused.value)
    assert message.startswith(f"STREAM_APP_{name}: ") and said in message
    for pydantic_words in ("Input should", "String should", "after validation", "Value error"):
        assert pydantic_words not in message


def test_the_worker_logs_an_unknown_variable_as_an_event_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stream_app", "worker"],
        env={**os.environ, "STREAM_APP_BOOTSTRAP": "kafka:9092", "STREAM_APP_PARTITIONS": "0"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    warning, error = done.stderr.splitlines()
    event = orjson.loads(warning)  # the worker's log: JSON lines off a terminal
    assert (event["event"], event["level"]) == ("setting_ignored", "warning")
    assert "did you mean STREAM_APP_BROKER_URL?" in event["warning"]
    assert error == "stream-app: STREAM_APP_PARTITIONS: must be 1 or more (got '0')"
    assert done.returncode == 2


def test_the_retired_sweep_interval_is_a_warning_not_a_crash(
    monkeypatch: pytest.MonkeyPatch, warnings: list[str]
) -> None:
    """Issue 50: the sweep went (the tick expires idle sessions); a deployment that still
    sets its interval is told, and starts."""
    monkeypatch.setenv("STREAM_APP_SWEEP_INTERVAL_SECONDS", "60")
    load_settings(warn=warnings.append)
    assert warnings == [
        "STREAM_APP_SWEEP_INTERVAL_SECONDS is no longer a setting and is ignored: idle "
        "sessions expire at the tick now, every STREAM_APP_FINAL_TICK_SECONDS (issue 50)"
    ]

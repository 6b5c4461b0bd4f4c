"""The commands a person types: replay on a terminal, dev --demo, tail."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import uuid
from pathlib import Path

import orjson
import pytest

from stream_app.embedded_broker import EmbeddedBroker, free_port
from tests.kafka_io import create_topics, publish

ROOT = Path(__file__).resolve().parent.parent


def test_replay_on_a_terminal_draws_a_summary_table(tmp_path: Path) -> None:
    leader, follower = pty.openpty()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "stream_app",
            "replay",
            str(ROOT / "examples" / "session.jsonl"),
            "--out",
            str(tmp_path / "t"),
            "--dlq",
            str(tmp_path / "d"),
        ],
        stderr=follower,
        stdout=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert done.returncode == 0
    text = shown.decode(errors="replace")
    assert "replay summary" in text and "turns emitted" in text
    assert "dead letters: tenant_mismatch" in text


@pytest.mark.broker
def test_dev_demo_runs_a_broker_and_a_worker_and_prints_the_turns() -> None:
    env = {
        **os.environ,
        "STREAM_APP_WEB_PORT": str(free_port()),
        "STREAM_APP_ID": f"dev-{uuid.uuid4().hex[:6]}",
    }
    done = subprocess.run(
        [sys.executable, "-m", "stream_app", "dev", "--demo", "--turns", "4"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "broker (Kafka protocol): 127.0.0.1:" in done.stdout
    for call in ("msg-a1", "msg-a2", "msg-a3", "msg-a4"):
        assert f'turn ["sess-7f3a","{call}"]:' in done.stdout  # the key: [session, call]


@pytest.mark.broker
def test_tail_prints_turns_as_json_lines(broker: EmbeddedBroker) -> None:
    topic = f"turns-{uuid.uuid4().hex[:6]}"
    create_topics(broker.bootstrap, [topic], 2)
    turn = {
        "new_messages": [],
        "completion": "ok",
        "decisions": [],
        "inference_call_id": "c1",
        "tool_calls": [],
    }
    publish(broker.bootstrap, [{"topic": "t", "key": "c1", "value": turn}], {"t": topic})
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "stream_app",
            "tail",
            "--json",
            "--limit",
            "1",
            "--bootstrap",
            broker.bootstrap,
            "--topic",
            topic,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert [orjson.loads(line) for line in done.stdout.splitlines()] == [
        {"key": "c1", "value": turn}
    ]

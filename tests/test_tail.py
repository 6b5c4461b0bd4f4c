"""Issue 10 item 7: ``stream-app tail`` fails in one line, within a bound, never a traceback.

No broker: one line per connection attempt, then exit 2. A topic the cluster does not have:
one line, exit 2. A broker that goes away while tailing: one line, exit 2, in bounded time.
"""

from __future__ import annotations

import select
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import IO

import orjson
import pytest

from stream_app import tail
from stream_app.embedded_broker import EmbeddedBroker, free_port
from tests.kafka_io import create_topics, publish

TURN = {
    "new_messages": [],
    "completion": "ok",
    "decisions": [],
    "inference_call_id": "c1",
    "tool_calls": [],
}


def _tail(*args: str) -> list[str]:
    return [sys.executable, "-m", "stream_app", "tail", *args]


def _assert_plain_lines(stderr: str) -> list[str]:
    lines = stderr.splitlines()
    assert all(line.startswith("stream-app tail: ") for line in lines), stderr
    assert "Traceback" not in stderr and "Unclosed" not in stderr, stderr
    return lines


def _read_line(stream: IO[str], deadline: float) -> str:
    """The next line the process prints, or an assertion error at the deadline."""
    left = deadline - time.monotonic()
    ready, _, _ = select.select([stream], [], [], max(0.0, left))
    assert ready, "no line before the deadline"
    return stream.readline()


def test_tail_without_a_broker_prints_one_line_per_attempt_then_exits_2() -> None:
    bootstrap = f"127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    done = subprocess.run(
        _tail("--bootstrap", bootstrap), capture_output=True, text=True, timeout=60, check=False
    )
    took = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    lines = _assert_plain_lines(done.stderr)
    assert len(lines) == tail.CONNECT_ATTEMPTS, done.stderr
    assert all(bootstrap in line for line in lines)
    assert "attempt 1 of 5" in lines[0] and "gave up after 5 attempts" in lines[-1]
    backoff = sum(tail.FIRST_BACKOFF * 2**i for i in range(tail.CONNECT_ATTEMPTS - 1))
    assert backoff <= took < backoff + 20  # it waited between attempts, and gave up


@pytest.mark.broker
def test_tail_of_a_topic_that_does_not_exist_is_one_line_and_exit_2(
    broker: EmbeddedBroker,
) -> None:
    topic = f"no-such-topic-{uuid.uuid4().hex[:6]}"
    done = subprocess.run(
        _tail("--bootstrap", broker.bootstrap, "--topic", topic),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert _assert_plain_lines(done.stderr) == [
        f"stream-app tail: topic {topic!r} does not exist on {broker.bootstrap}"
    ]


@pytest.mark.broker
def test_tail_reports_a_broker_that_goes_away_in_one_line_and_exits_2(tmp_path: Path) -> None:
    own = EmbeddedBroker(log=tmp_path / "tansu.log").start()  # this test stops it
    process: subprocess.Popen[str] | None = None
    try:
        create_topics(own.bootstrap, ["turns"], 2)
        publish(own.bootstrap, [{"topic": "t", "key": "c1", "value": TURN}], {"t": "turns"})
        process = subprocess.Popen(
            _tail("--json", "--bootstrap", own.bootstrap, "--topic", "turns"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None
        line = _read_line(process.stdout, time.monotonic() + 60)
        assert orjson.loads(line) == {"key": "c1", "value": TURN}  # tailing for real
        own.stop()
        gone = time.monotonic()
        status = process.wait(tail.LOST_AFTER + 30)
        took = time.monotonic() - gone
        stderr = process.stderr.read() if process.stderr else ""
    finally:
        own.stop()
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
    assert status == 2, stderr
    assert _assert_plain_lines(stderr) == [
        f"stream-app tail: lost the Kafka broker at {own.bootstrap}: "
        f"no answer for {tail.LOST_AFTER:g} s"
    ]
    assert took < tail.LOST_AFTER + 15  # bounded: it gives up, it does not hang

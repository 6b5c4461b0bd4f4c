"""Issue 10 item 7: ``stream-app tail`` fails in one line, within a bound, never a traceback.

No broker: one line per connection attempt, then exit 2. A topic the cluster does not have:
one line, exit 2. A broker that goes away while tailing: one line, exit 2, in bounded time.
"""

from __future__ import annotations

import asyncio
import io
import os
import pty
import select
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import IO

import orjson
import pytest

from stream_app.broker.embedded import EmbeddedBroker, free_port
from stream_app.cli import tail
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


def _ctrl_c_reaches() -> None:
    """A shell's background job (``cmd &``) starts with Ctrl-C ignored, and Python keeps an
    ignored SIGINT ignored: the suite run so would find a tail that cannot hear Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _read_line(stream: IO[str], deadline: float) -> str:
    """The next line the process prints, or an assertion error at the deadline."""
    left = deadline - time.monotonic()
    ready, _, _ = select.select([stream], [], [], max(0.0, left))
    assert ready, "no line before the deadline"
    return stream.readline()


@pytest.mark.slow  # it waits out the backoff between attempts: about 8 s
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
        assert orjson.loads(line) == {"key": "c1", "headers": {}, "value": TURN}  # for real
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


# -- issue 23: what a person sees while tailing -------------------------------------------


def _record(topic: str, key: bytes, value: object, headers: list[tuple[str, bytes]]) -> object:
    return SimpleNamespace(topic=topic, key=key, value=orjson.dumps(value), headers=headers)


def test_a_revision_says_its_number_and_a_dead_letter_says_why() -> None:
    out = io.StringIO()
    final_after = ("final_after", b"2026-11-29T16:03:00.000000Z")
    first = [("session_id", b"s"), ("revision", b"1"), final_after]
    second = [("session_id", b"s"), ("revision", b"2"), final_after]
    letter = {
        "reason": "schema",
        "source_topic": "llm.messages",
        "partition": 1,
        "offset": 11,
        "error": "message.role: Field required",
    }
    shown = [
        tail._print(_record("turns", b'["s","c1"]', TURN, first), False, out, "dlq"),
        tail._print(_record("turns", b'["s","c1"]', TURN, second), False, out, "dlq"),
        tail._print(_record("dlq", b"s", letter, []), False, out, "dlq"),
    ]
    assert shown == [True, True, False]  # a dead letter does not count towards --limit
    lines = out.getvalue().splitlines()
    assert lines[0] == 'turn ["s","c1"]: 0 new messages'
    assert lines[4] == 'turn ["s","c1"], revision 2: 0 new messages'
    assert lines[8:] == [
        "dead letter: schema (llm.messages partition 1 offset 11)",
        "  error: message.role: Field required",
    ]


def test_a_json_line_carries_the_records_headers() -> None:
    """Issue 43 item 4: ``--json`` keeps what tells revisions apart and says when a turn is
    final (the revision and final_after headers), as the plain lines say the revision."""
    out = io.StringIO()
    headers = [("session_id", b"s"), ("revision", b"2"), ("final_after", b"2026-11-29T16:03:00Z")]
    assert tail._print(_record("turns", b'["s","c1"]', TURN, headers), True, out, "dlq")
    assert orjson.loads(out.getvalue()) == {
        "key": '["s","c1"]',
        "headers": {"session_id": "s", "revision": "2", "final_after": "2026-11-29T16:03:00Z"},
        "value": TURN,
    }


@pytest.mark.broker
def test_tail_follows_turns_and_dead_letters_until_ctrl_c_and_says_so(
    broker: EmbeddedBroker,
) -> None:
    run = uuid.uuid4().hex[:6]
    turns, dlq = f"turns-{run}", f"dlq-{run}"
    create_topics(broker.bootstrap, [turns, dlq], 2)
    letter = {"reason": "schema", "error": "x"}
    publish(
        broker.bootstrap,
        [{"topic": "t", "key": "c1", "value": TURN}, {"topic": "d", "key": "k", "value": letter}],
        {"t": turns, "d": dlq},
    )
    leader, follower = pty.openpty()  # stderr on a terminal: a person is watching
    process = subprocess.Popen(  # bytes: read as they come
        _tail("--json", "--dead-letters", "--bootstrap", broker.bootstrap, "--topic", turns),
        env={**os.environ, "STREAM_APP_TOPIC_DLQ": dlq},
        stdout=subprocess.PIPE,
        stderr=follower,
        preexec_fn=_ctrl_c_reaches,
    )
    os.close(follower)
    try:
        assert process.stdout is not None
        deadline, shown = time.monotonic() + 60, b""
        while shown.count(b"\n") < 2:  # read from the pipe itself: no buffer hides a line
            ready, _, _ = select.select([process.stdout], [], [], deadline - time.monotonic())
            assert ready, f"two records not shown in 60 s: {shown!r}"
            shown += os.read(process.stdout.fileno(), 65536)
        seen = [orjson.loads(line) for line in shown.splitlines()]
        assert sorted(seen, key=len) == [
            {"dead_letter": letter},
            {"key": "c1", "headers": {}, "value": TURN},
        ]
        said = os.read(leader, 65536).decode()
        assert said.startswith(f"stream-app tail: following {turns} and {dlq} at ")
        assert said.rstrip().endswith("until Ctrl-C")
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 0  # Ctrl-C is how it ends: not an error
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(leader)


def test_ctrl_c_as_the_broker_answers_still_ends_tail() -> None:
    """A cancellation that comes as connecting completes is not swallowed (CPython 86296:
    wait_for returns the call's result instead); tail would follow on, and dev, which
    cancels it to stop, would never end."""

    class Answers:
        async def start(self) -> None:
            await asyncio.sleep(0)
            following.cancel()  # Ctrl-C, in the loop turn the broker answers in

        async def stop(self) -> None:
            pass

    async def follow() -> None:
        await tail._started(Answers())  # type: ignore[arg-type]
        await asyncio.Event().wait()  # tail follows the topic from here, until cancelled

    async def scenario() -> bool:
        nonlocal following
        following = asyncio.ensure_future(follow())
        await asyncio.wait([following], timeout=10)  # a deadline, not a pause
        return following.cancelled()

    following: asyncio.Future[None]
    assert asyncio.run(scenario())

"""Issue 12 end to end: ``stream-app publish`` feeds a worker on the embedded broker,
``stream-app export`` reads its turns back, and both agree with ``stream-app replay`` of the
same file: the same final turns, and revision headers numbering each key's emissions as
replay emits them.

Kafka orders records only within a partition, and messages and decisions are two topics: a
worker may see a decision before the message it follows in the file, which changes how many
revisions a turn gets (not its final content). So a file is published in runs of one topic,
each run applied by the worker (its consumer group has committed every input offset) before
the next is published; then the worker sees the file's order and must number alike.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from itertools import groupby
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Consumer, TopicPartition

from bench.workload import generate
from stream_app.broker.embedded import WORKER_SETTINGS, EmbeddedBroker
from stream_app.core.revisions import read_headers
from stream_app.datasets.topic import read_to_end
from stream_app.models.topics import partition_for
from tests.contracts import assert_valid_turn, assert_valid_turn_key
from tests.kafka_io import create_topics
from tests.terminal import on_a_terminal
from tests.test_cli import run as stream_app_cli
from tests.worker_process import WorkerProcess

pytestmark = pytest.mark.broker

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "session.jsonl"
PARTITIONS = 4
WINDOW = 6 * 3600.0  # STREAM_APP_LATE_DECISION_WINDOW_SECONDS's default


class Round:
    """A test's topics, its worker, and the commands run against them."""

    def __init__(self, broker: EmbeddedBroker, topics: dict[str, str], workdir: Path) -> None:
        self.broker, self.topics, self.workdir = broker, topics, workdir
        self.env = {
            **WORKER_SETTINGS,  # also what the commands need against this broker (plaintext)
            **topics,
            "STREAM_APP_BROKER_URL": broker.url,
            "STREAM_APP_PARTITIONS": str(PARTITIONS),
            "STREAM_APP_COMMIT_INTERVAL_MS": "200",
        }
        inputs = [topics["STREAM_APP_TOPIC_MESSAGES"], topics["STREAM_APP_TOPIC_DECISIONS"]]
        outputs = [topics["STREAM_APP_TOPIC_TURNS"], topics["STREAM_APP_TOPIC_DLQ"]]
        create_topics(broker.bootstrap, inputs + outputs, PARTITIONS)
        self.inputs = inputs
        self.worker = WorkerProcess(broker, self.env, workdir)
        self.started = time.time()

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return stream_app_cli(*args, env={**os.environ, **self.env}, timeout=180)

    def publish_in_runs(self, source: Path) -> list[str]:
        """Publishes ``source`` one run of a topic at a time; returns what publish said."""
        said = []
        lines = source.read_bytes().splitlines(keepends=True)
        runs = groupby(lines, key=lambda x: orjson.loads(x)["topic"] if x.strip() else "")
        for n, (_, run) in enumerate(runs):
            part = self.workdir / f"{source.stem}-{n}.jsonl"
            part.write_bytes(b"".join(run))
            done = self.cli("publish", str(part))
            # A run of nothing but bad records sends nothing: publish calls that a failure.
            nothing = "stream-app publish: nothing sent: every line was rejected" in done.stderr
            assert done.returncode == (2 if nothing else 0), done.stderr
            said.append(done.stderr)
            self.wait_applied(timeout=120)
        return said

    def records(self, topic: str) -> list[Any]:
        got: list[Any] = []
        asyncio.run(read_to_end({"bootstrap_servers": self.broker.bootstrap}, topic, got.append))
        return got

    def wait_applied(self, timeout: float) -> None:
        """Until the worker's group has committed the end of every input partition."""
        ends: dict[tuple[str, int], int] = {}
        sessions = self.topics["STREAM_APP_ID"] + "-sessions"  # records re-keyed, if any
        for topic in [*self.inputs, sessions]:
            for record in self.records(topic):
                ends[(topic, record.partition)] = record.offset + 1
        deadline = time.monotonic() + timeout
        while True:
            committed = self._committed(list(ends))
            behind = {tp: end for tp, end in ends.items() if committed.get(tp, 0) < end}
            if not behind:
                return
            assert self.worker.process is not None and self.worker.process.poll() is None, (
                self.worker.log.read_text()[-3000:]
            )
            if time.monotonic() > deadline:
                raise AssertionError(f"worker did not apply {behind} in {timeout} s")
            time.sleep(0.1)

    def _committed(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The worker group's committed offsets, asked without joining the group."""
        group = Consumer(
            {"bootstrap.servers": self.broker.bootstrap, "group.id": self.topics["STREAM_APP_ID"]}
        )
        try:
            asked = [TopicPartition(topic, partition) for topic, partition in tps]
            return {(tp.topic, tp.partition): tp.offset for tp in group.committed(asked, 10)}
        finally:
            group.close()

    def replayed(self, source: Path) -> list[dict[str, Any]]:
        """``stream-app replay`` of the same file: its TURNS lines, one per emission."""
        out, dlq = self.workdir / "replay-turns.jsonl", self.workdir / "replay-dlq.jsonl"
        done = self.cli("replay", str(source), "--out", str(out), "--dlq", str(dlq))
        assert done.returncode == 0, done.stderr
        return [orjson.loads(x) for x in out.read_bytes().splitlines()]


@pytest.fixture
def round_(broker: EmbeddedBroker, topics: dict[str, str], workdir: Path) -> Iterator[Round]:
    r = Round(broker, topics, workdir)
    r.worker.start().wait_ready()
    yield r
    r.worker.stop()


def unstamp(turn: dict[str, Any]) -> dict[str, Any]:
    """Without the processor's own captured_at stamps, which differ between any two runs."""
    decisions = [
        {**d, "captured_at": "stamped"} if len(d["captured_at"]) == 27 else d
        for d in turn["decisions"]
    ]
    return {**turn, "decisions": decisions}


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines()]


def assert_round_trip(r: Round, source: Path) -> dict[str, dict[str, Any]]:
    """Exports the turns and checks them and their headers against replay; returns them."""
    emissions = r.replayed(source)
    replay_final = {e["key"]: unstamp(e["value"]) for e in emissions}
    replay_counts: dict[str, int] = defaultdict(int)
    for e in emissions:
        replay_counts[e["key"]] += 1

    out = r.workdir / "export.jsonl"
    done = r.cli("export", "--out", str(out), "--include-open")
    assert done.returncode == 0, done.stderr
    exported = {line["key"]: line["value"] for line in read_lines(out)}
    assert {k: unstamp(v) for k, v in exported.items()} == replay_final
    for key, turn in exported.items():
        assert_valid_turn(turn)
        assert_valid_turn_key(key.encode(), turn, orjson.loads(key)[0])
    n = len(exported)
    read, wrote = done.stderr.splitlines()  # one line each: what was read, what written
    turns_topic = r.topics["STREAM_APP_TOPIC_TURNS"]
    assert f"records read from topic {turns_topic}, the latest revision of {n} turns" in read
    assert wrote == (
        f"stream-app export: {n} turn lines written to {out} ({n}); 0 turns skipped; "
        f"manifest {out.with_name('export.manifest.json')}"
    )
    # Chat examples from the topic equal those from replay's file: each session's turns in the
    # order first emitted, though a late decision's revision comes after later turns.
    chats = []
    for name, source_args in (
        ("topic-chat.jsonl", ["--include-open"]),
        ("file-chat.jsonl", ["--from", str(r.workdir / "replay-turns.jsonl")]),
    ):
        done = r.cli("export", *source_args, "--format", "chat", "--out", str(r.workdir / name))
        assert done.returncode == 0, done.stderr
        by_session: dict[str, list[bytes]] = defaultdict(list)
        # Issue 52: an example's metadata is the same line of its sidecar.
        sidecar = (r.workdir / name.replace(".jsonl", ".metadata.jsonl")).read_bytes()
        for line, meta in zip(
            (r.workdir / name).read_bytes().splitlines(), sidecar.splitlines(), strict=True
        ):
            by_session[orjson.loads(meta)["session_id"]].append(line)
        chats.append(dict(by_session))
    # Each turn an example, but a fork's copy of an example written (the example's retry
    # copies msg-a1): skipped duplicate_example.
    manifest = orjson.loads((r.workdir / "file-chat.manifest.json").read_bytes())
    duplicates = manifest["skipped"]["duplicate_example"]
    assert duplicates == (source == EXAMPLE)
    assert chats[0] == chats[1] and sum(map(len, chats[0].values())) + duplicates == len(exported)

    # Every record on the turn topic carries consistent headers, numbering its key's
    # emissions 1, 2, ... as replay emitted them, with one final_after per key.
    numbers: dict[str, list[int]] = defaultdict(list)
    final_after: dict[str, set[float]] = defaultdict(set)
    for record in r.records(r.topics["STREAM_APP_TOPIC_TURNS"]):
        key = record.key.decode()
        headers = read_headers(record.headers)
        assert headers is not None, record.headers
        assert headers.session_id == orjson.loads(key)[0]
        assert record.partition == partition_for(headers.session_id.encode(), PARTITIONS)
        numbers[key].append(headers.revision)
        final_after[key].add(headers.final_after)
    assert {k: v for k, v in numbers.items()} == {
        k: list(range(1, n + 1)) for k, n in replay_counts.items()
    }
    for instants in final_after.values():
        (instant,) = instants
        assert r.started + WINDOW - 1 <= instant <= time.time() + WINDOW

    # By default the final topic: no turn is final yet, the window being six hours.
    done = r.cli("export", "--out", str(r.workdir / "final.jsonl"))
    assert done.returncode == 0, done.stderr
    assert not (r.workdir / "final.jsonl").exists()  # issue 52: no turn, nothing written
    assert "0 turns final (--include-open reads" in done.stderr
    assert "nothing written" in done.stderr
    return exported


def assert_keyed_by_session(r: Round) -> None:
    """Publish put every input record under its session id, on the session's partition."""
    for topic in r.inputs:
        for record in r.records(topic):
            value = orjson.loads(record.value)
            session = value.get("conversationId") or value.get("session_id")
            assert record.key == session.encode()
            assert record.partition == partition_for(record.key, PARTITIONS)


def test_the_example_published_worked_and_exported_equals_replay(round_: Round) -> None:
    said = round_.publish_in_runs(EXAMPLE)
    # The lines the worker would dead-letter at intake are reported, not sent.
    reported = [
        x
        for x in "".join(said).splitlines()
        if x.startswith(f"stream-app publish: {round_.workdir}")
    ]
    assert [x.rsplit(" ", 1)[-1] for x in reported] == [
        "(invalid_json)",
        "(tenant_mismatch)",
        "(schema)",
    ]
    assert_keyed_by_session(round_)
    exported = assert_round_trip(round_, EXAMPLE)
    assert len(exported) == 6  # the session's 4 turns and its retry's 2


def test_a_generated_stream_published_worked_and_exported_equals_replay(
    round_: Round, workdir: Path
) -> None:
    lines = list(generate(records=10_000, sessions=150, seed=12))
    # Messages first, then decisions: two runs, so the worker sees the file's order.
    ordered = [x for x in lines if x["topic"] == "messages"]
    ordered += [x for x in lines if x["topic"] == "decisions"]
    source = workdir / "generated.jsonl"
    source.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in ordered))
    said = round_.publish_in_runs(source)
    assert len(said) == 2
    assert "lines skipped (invalid_json" in said[0]  # the generator's truncated records
    assert_keyed_by_session(round_)
    exported = assert_round_trip(round_, source)
    assert len(exported) > 100


def test_a_missing_topic_is_one_line_and_exit_2_for_publish_and_export(
    broker: EmbeddedBroker, topics: dict[str, str], workdir: Path
) -> None:
    env = {**os.environ, **WORKER_SETTINGS, **topics, "STREAM_APP_BROKER_URL": broker.url}
    source = workdir / "one.jsonl"
    source.write_bytes(EXAMPLE.read_bytes().splitlines(keepends=True)[0])
    for args in (["publish", str(source)], ["export", "--out", str(workdir / "t.jsonl")]):
        done = stream_app_cli(*args, env=env, timeout=120)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().count("\n") == 0, done.stderr
        assert "does not exist" in done.stderr
    assert not (workdir / "t.jsonl").exists()
    # Once the topics exist, a file whose every line passes is sent under --strict too.
    create_topics(
        broker.bootstrap,
        [topics["STREAM_APP_TOPIC_MESSAGES"], topics["STREAM_APP_TOPIC_DECISIONS"]],
        PARTITIONS,
    )
    done = subprocess.run(
        [sys.executable, "-m", "stream_app", "publish", "--strict", str(source)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "stream-app publish: 1 record sent (1 message, 0 decisions); 0 lines skipped",
        # The one line is a user message: no turn until a finishing message comes (issue 43).
        "stream-app publish: warning: 1 session ends with messages that no finishing message "
        "closes (an assistant message with finishReason): sess-7f3a",
    ]


def test_publish_and_export_draw_a_progress_bar_on_a_terminal(
    broker: EmbeddedBroker, topics: dict[str, str], workdir: Path
) -> None:
    names = [topics[f"STREAM_APP_TOPIC_{t}"] for t in ("MESSAGES", "DECISIONS", "TURNS", "FINAL")]
    create_topics(broker.bootstrap, names, PARTITIONS)
    env = {**os.environ, **WORKER_SETTINGS, **topics, "STREAM_APP_BROKER_URL": broker.url}
    status, shown = on_a_terminal(["publish", str(EXAMPLE)], env)
    assert status == 0
    assert "publishing" in shown and "━" in shown
    assert "session.jsonl:14: value is not JSON" in shown
    assert "publish: 20 records sent (15 messages, 5 decisions); 3 lines skipped (" in shown
    status, shown = on_a_terminal(["export", "--out", str(workdir / "t.jsonl")], env)
    assert status == 0
    assert "exporting" in shown and "━" in shown
    assert "export: 0 records read from topic" in shown and "nothing written" in shown

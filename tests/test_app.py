"""SPEC §1, §5 and §7: the worker on a real broker gives what replay gives, through crashes
and rebalances. Nothing here is mocked: tansu speaks the Kafka protocol, the worker is a
``stream-app worker`` process, and records go in and out through librdkafka."""

from __future__ import annotations

import io
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.workload import generate
from stream_app.broker.embedded import EmbeddedBroker
from stream_app.cli.replay import replay
from stream_app.config import Settings
from stream_app.core.records import turn_key
from stream_app.models.topics import partition_for
from tests.contracts import assert_valid_turn
from tests.kafka_io import TopicReader, create_topics, final_turns, publish
from tests.worker_process import WorkerProcess

pytestmark = pytest.mark.broker

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS = 4


def example_lines() -> list[dict[str, Any]]:
    """The records of ``examples/session.jsonl``, in file order."""
    return [
        orjson.loads(x) for x in (ROOT / "examples" / "session.jsonl").read_bytes().splitlines()
    ]


def session_lines() -> list[dict[str, Any]]:
    """The example's first session alone, without its retry (the fork that gives the
    datasets' dpo pair): the tests that count one session's turns, records and dead
    letters on a worker."""
    return [line for line in example_lines() if b"sess-7f3a-retry" not in orjson.dumps(line)]


def replayed(
    lines: list[dict[str, Any]], topics: dict[str, str], **limits: int
) -> tuple[dict, Counter]:
    """What ``stream-app replay`` gives for the same records: final turns and dead letters.
    ``limits``: settings the workers run with (``max_open_turns=6``, say)."""
    settings = Settings(
        topic_messages=topics["STREAM_APP_TOPIC_MESSAGES"],
        topic_decisions=topics["STREAM_APP_TOPIC_DECISIONS"],
        **limits,
    )
    turns, dlq = io.BytesIO(), io.BytesIO()
    replay((orjson.dumps(line) for line in lines), settings, turns, dlq)
    final = {}
    for line in turns.getvalue().splitlines():
        doc = orjson.loads(line)
        final[doc["key"]] = doc["value"]
    return final, letters([orjson.loads(x) for x in dlq.getvalue().splitlines()])


def letters(dead: list[dict[str, Any]]) -> Counter:
    """Dead letters up to partition, offset and time, each counted once (at-least-once)."""
    return Counter(
        {(d["source_topic"], d["key"], d["value"], d["reason"], d["error"]) for d in dead}
    )


def unstamp(turns: dict[str, dict]) -> dict[str, dict]:
    """Drops the processor's own captured_at stamps, which differ between any two runs."""
    out = {}
    for key, turn in turns.items():
        decisions = [
            {**d, "captured_at": "stamped"}
            if d["captured_at"].endswith("Z") and len(d["captured_at"]) == 27
            else d
            for d in turn["decisions"]
        ]
        out[key] = {**turn, "decisions": decisions}
    return out


class Pipeline:
    """A test's topics, readers of its outputs, and its worker processes."""

    def __init__(
        self,
        broker: EmbeddedBroker,
        topics: dict[str, str],
        workdir: Path,
        input_partitions: int = PARTITIONS,
    ) -> None:
        self.broker, self.topics, self.workdir = broker, topics, workdir
        create_topics(
            broker.bootstrap,
            [topics["STREAM_APP_TOPIC_MESSAGES"], topics["STREAM_APP_TOPIC_DECISIONS"]],
            input_partitions,
        )
        create_topics(
            broker.bootstrap,
            [topics["STREAM_APP_TOPIC_TURNS"], topics["STREAM_APP_TOPIC_DLQ"]],
            PARTITIONS,
        )
        self.turns = TopicReader(broker.bootstrap, topics["STREAM_APP_TOPIC_TURNS"], PARTITIONS)
        self.dlq = TopicReader(broker.bootstrap, topics["STREAM_APP_TOPIC_DLQ"], PARTITIONS)
        self.workers: list[WorkerProcess] = []

    def worker(self, name: str = "worker") -> WorkerProcess:
        w = WorkerProcess(
            self.broker,
            {**self.topics, "STREAM_APP_PARTITIONS": str(PARTITIONS)},
            self.workdir,
            name,
        )
        self.workers.append(w)
        return w

    def publish(self, lines: list[dict[str, Any]]) -> int:
        return publish(
            self.broker.bootstrap,
            lines,
            {
                "messages": self.topics["STREAM_APP_TOPIC_MESSAGES"],
                "decisions": self.topics["STREAM_APP_TOPIC_DECISIONS"],
            },
        )

    def the_examples_turns_on_a_worker(self) -> tuple[WorkerProcess, dict, Counter]:
        """The example's messages through a worker, stopped once their 6 turns are out (the
        session's 4, its retry's 2); what replay expects of the whole example (its decisions
        still to come)."""
        lines = example_lines()
        expected, expected_letters = replayed(lines, self.topics)
        worker = self.worker()
        worker.start().wait_ready()
        # Messages by conversation key, so one partition keeps a session's order (the one
        # published under a wrong key too; a value that is no JSON object keeps its key).
        messages = [
            {
                **line,
                "key": v["conversationId"] if isinstance(v := line["value"], dict) else line["key"],
            }
            for line in lines
            if line["topic"] == "messages"
        ]
        self.publish(messages)
        self.turns.wait_until(lambda: len(final_turns(self.turns)) == 6, 60, "6 turns")
        worker.stop()
        return worker, expected, expected_letters

    def wait_for(self, expected_turns: dict, expected_letters: Counter, timeout: float) -> None:
        want = unstamp(expected_turns)
        try:
            self.turns.wait_until(
                lambda: unstamp(final_turns(self.turns)) == want,
                timeout,
                f"{len(expected_turns)} final turns",
            )
        except AssertionError as exc:
            got = unstamp(final_turns(self.turns))
            missing = sorted(set(want) - set(got))
            wrong = sorted(k for k in set(want) & set(got) if want[k] != got[k])
            extra = sorted(set(got) - set(want))
            sample = wrong[0] if wrong else None
            raise AssertionError(
                f"{exc}: {len(missing)} missing {missing[:5]}, {len(wrong)} different "
                f"{wrong[:5]}, {len(extra)} unexpected {extra[:5]}; first different: "
                f"want {sample and want[sample]} got {sample and got[sample]}"
            ) from None
        self.dlq.wait_until(
            lambda: letters(self.dlq.values()) == expected_letters,
            timeout,
            f"{len(expected_letters)} dead letters",
        )

    def close(self) -> None:
        for w in self.workers:
            w.stop()
        self.turns.close()
        self.dlq.close()


def test_the_example_through_a_worker_equals_replay(
    broker: EmbeddedBroker, topics: dict[str, str], workdir: Path
) -> None:
    # One input partition: Kafka orders only within a partition, and the example publishes
    # one of its messages under a wrong key.
    p = Pipeline(broker, topics, workdir, input_partitions=1)
    try:
        lines = example_lines()
        expected, expected_letters = replayed(lines, topics)
        p.worker().start().wait_ready()
        p.publish(lines)
        p.wait_for(expected, expected_letters, timeout=60)
        sessions = set()
        for partition, key, value in p.turns.records:
            turn = orjson.loads(value)
            assert_valid_turn(turn)
            session = orjson.loads(key)[0]  # the session, then its retry (a fork)
            sessions.add(session)
            assert key == turn_key(session, turn["inference_call_id"])
            assert partition == partition_for(session.encode(), PARTITIONS)  # the session's
        assert sessions == {"sess-7f3a", "sess-7f3a-retry"}
        (startup,) = (
            orjson.loads(line)
            for line in p.workers[0].log.read_text().splitlines()
            if line.startswith('{"') and '"event":"startup"' in line
        )
        assert startup["loop"] == "uvloop"  # cli.use_uvloop, before the app made a loop
    finally:
        p.close()


def test_a_worker_killed_twice_mid_stream_ends_with_the_turns_of_an_uninterrupted_replay(
    pipeline: Pipeline,
) -> None:
    lines = list(generate(records=20_000, sessions=500, seed=11))
    expected, expected_letters = replayed(lines, pipeline.topics)
    worker = pipeline.worker().start()
    worker.wait_ready()
    started = time.monotonic()
    half = len(lines) // 2
    kills = []
    # Each kill lands as soon as the worker is seen making progress on records it has not
    # finished: the first half, then the second, published while it was down.
    for part in (lines[:half], lines[half:]):
        pipeline.publish(part)
        seen = len(pipeline.turns.records)
        pipeline.turns.wait_until(
            lambda s=seen: len(pipeline.turns.records) >= s + 50, 180, "progress"
        )
        worker.kill()
        kills.append(len(pipeline.turns.records))
        assert unstamp(final_turns(pipeline.turns)) != unstamp(expected), "killed too late"
        worker.start()
        worker.wait_ready()
    pipeline.wait_for(expected, expected_letters, timeout=300)
    elapsed = time.monotonic() - started
    print(
        f"\ncrash test: {len(lines)} records, {len(expected)} turns, "
        f"{len(pipeline.turns.records)} revisions read, killed at {kills}, "
        f"{len(lines) / elapsed:.0f} records/s including two restarts"
    )


def assigned(worker: WorkerProcess) -> list[str]:
    """The sessions partitions this worker was given at its latest rebalance."""
    latest: list[str] = []
    for line in worker.log.read_text().splitlines():
        if line.startswith("{") and '"partitions_assigned"' in line:
            latest = orjson.loads(line)["partitions"]
    return latest


def test_a_second_worker_joins_mid_stream_and_takes_over_when_the_first_stops(
    pipeline: Pipeline,
) -> None:
    lines = list(generate(records=12_000, sessions=300, seed=5))
    expected, expected_letters = replayed(lines, pipeline.topics)
    third = len(lines) // 3
    first = pipeline.worker("first").start()
    first.wait_ready()
    pipeline.publish(lines[:third])
    # The second joins while the first holds sessions half done: partitions move with
    # their state (changelog) and their progress (committed offsets).
    second = pipeline.worker("second").start()
    pipeline.turns.wait_until(
        lambda: (
            len(assigned(first)) + len(assigned(second)) == PARTITIONS
            and assigned(first) != []
            and assigned(second) != []
        ),
        60,
        "both workers to own partitions",
    )
    pipeline.publish(lines[third : 2 * third])
    pipeline.turns.wait_until(
        lambda: len(pipeline.turns.records) >= 0.4 * len(expected), 120, "40% of the turns"
    )
    first.stop()
    pipeline.turns.wait_until(
        lambda: len(assigned(second)) == PARTITIONS, 60, "the second worker to own all"
    )
    pipeline.publish(lines[2 * third :])
    pipeline.wait_for(expected, expected_letters, timeout=240)


def test_a_worker_killed_during_a_rebalance_loses_nothing(pipeline: Pipeline) -> None:
    lines = list(generate(records=12_000, sessions=300, seed=17))
    expected, expected_letters = replayed(lines, pipeline.topics)
    half = len(lines) // 2
    first = pipeline.worker("first").start()
    first.wait_ready()
    pipeline.publish(lines[:half])
    pipeline.turns.wait_until(lambda: len(pipeline.turns.records) >= 200, 120, "progress")
    joins = first.log.read_text().count("(Re-)joining group")
    # A second worker joins: the first is killed as soon as it starts rebalancing, with
    # records fetched, batches in flight and partitions about to move.
    second = pipeline.worker("second").start()
    pipeline.turns.wait_until(
        lambda: first.log.read_text().count("(Re-)joining group") > joins, 60, "a rebalance"
    )
    first.kill()
    assert unstamp(final_turns(pipeline.turns)) != unstamp(expected), "killed too late"
    pipeline.publish(lines[half:])
    second.wait_ready()
    first.start()  # and back, into another rebalance
    pipeline.wait_for(expected, expected_letters, timeout=300)


def test_a_killed_worker_processes_again_within_seconds_of_its_restart(
    pipeline: Pipeline,
) -> None:
    worker = pipeline.worker().start()
    worker.wait_ready()
    probes = 0

    def probe() -> float:
        """Seconds from publishing a completed inference call to reading its turn."""
        nonlocal probes
        probes += 1
        call = {
            "topic": "messages",
            "key": f"probe-{probes}",
            "value": {
                "conversationId": f"probe-{probes}",
                "message": {
                    "role": "ROLE_ASSISTANT",
                    "messageId": f"probe-call-{probes}",
                    "finishReason": "stop",
                    "content": [{"text": "ok"}],
                },
            },
        }
        sent = time.monotonic()
        pipeline.publish([call])
        pipeline.turns.wait_until(
            lambda: (
                turn_key(f"probe-{probes}", f"probe-call-{probes}").decode()
                in final_turns(pipeline.turns)
            ),
            120,
            "the probe's turn",
        )
        return time.monotonic() - sent

    probe()
    worker.kill()
    restarted = time.monotonic()
    worker.start()
    ready = worker.wait_ready()
    probe()
    seconds = time.monotonic() - restarted
    print(f"\nrestart after SIGKILL: ready in {ready:.1f} s, processing again in {seconds:.1f} s")
    assert seconds < 30, "with the tuned group settings a restart takes a few seconds"


def test_a_restarted_worker_recovers_its_sessions_from_the_changelog(
    pipeline: Pipeline,
) -> None:
    worker, expected, expected_letters = pipeline.the_examples_turns_on_a_worker()
    worker.start().wait_ready()
    recovered = [
        orjson.loads(line)
        for line in worker.log.read_text().splitlines()
        if line.startswith('{"') and '"recovery_done"' in line
    ]
    assert recovered[-1]["sessions"] == 2  # the sessions came back from the changelog
    # The decisions join turns that only the recovered state knows.
    pipeline.publish([line for line in example_lines() if line["topic"] == "decisions"])
    pipeline.wait_for(expected, expected_letters, timeout=60)


def test_sessions_whose_ids_hold_separators_survive_a_restart(pipeline: Pipeline) -> None:
    """Issue 10: NUL separated the keys of the old changelog, so a session ``nul\\x00a`` lost
    its pending message across a restart and ``victim-1\\x00vcall`` broke recovery. Every
    key the worker writes is now unambiguous for any id."""
    from tests.factories import assistant, decision, message, tool_call

    def line(topic: str, value: dict[str, Any]) -> dict[str, Any]:
        session = value.get("conversationId") or value.get("session_id")
        return {"topic": topic, "key": session, "value": value}

    ids = ["nul\x00a", "victim-1", "victim-1\x00vcall", 'quote"\\', "\u00e9\U0001f600"]
    before = [line("messages", message(s, text=f"question of {s!r}")) for s in ids]
    before += [
        line("messages", assistant("victim-1", message_id="vcall", tool_calls=[tool_call("t1")])),
        line("messages", assistant("victim-1\x00vcall", message_id="vcall")),
    ]
    after = [line("messages", assistant(s, message_id=f"done-{i}")) for i, s in enumerate(ids)]
    after += [
        line("decisions", decision("victim-1", "t1", decision_id="late-1", org_id="default")),
        line("decisions", decision("nul\x00a", "done-0", decision_id="late-2", org_id="default")),
    ]
    expected, expected_letters = replayed(before + after, pipeline.topics)
    worker = pipeline.worker()
    worker.start().wait_ready()
    pipeline.publish(before)
    pipeline.turns.wait_until(lambda: len(final_turns(pipeline.turns)) == 2, 60, "2 turns")
    worker.kill()  # what it wrote is all that is left: its changelog and RocksDB
    worker.start().wait_ready()
    pipeline.publish(after)
    pipeline.wait_for(expected, expected_letters, timeout=60)
    final = final_turns(pipeline.turns)
    assert (
        final[turn_key("nul\x00a", "done-0").decode()]["new_messages"][0]["parts"][0]["content"]
        == "question of 'nul\\x00a'"
    )
    assert worker.process is not None and worker.process.poll() is None

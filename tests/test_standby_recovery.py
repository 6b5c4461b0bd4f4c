"""Issue 44 item 5: workers keeping standbys of each other through kills, restarts and
workers started on empty data directories, input published throughout, give replay's turns.

The issue's sequence, repeated in cycles on one pipeline: of two workers A and B, A is
killed and restarted, B killed 0.3-0.5 s after A's new assignment (while A recovers) and
its partitions taken over from the standby tables A has just rebuilt, a third worker C
started on an empty data directory (it rebuilds its tables from the changelogs) and B
restarted. Then A and B stop for good and C takes every partition over, from the standby
tables it has just built among them, and another worker joins on an empty directory: it
and C are the next cycle's A and B. Each rebuild reads a standby table's whole changelog while
recovery seeks the partition back, and each is promoted: a table that applied a fetch past
records it had refused (the consumer's rule R13) lacks their entries once promoted, and a
waiting decision vanishes from its session (its turn emitted once, without it).
"""

from __future__ import annotations

import itertools
import random
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.workload import generate
from stream_app.broker.embedded import EmbeddedBroker
from stream_app.models.topics import partition_for
from tests.contracts import assert_valid_turn
from tests.kafka_io import TopicReader, create_topics, final_turns, publish
from tests.test_app import letters, replayed, unstamp
from tests.worker_process import WorkerProcess

# It publishes for PUBLISHING_SECONDS whatever the machine does: run first (tests/conftest.py).
pytestmark = [pytest.mark.broker, pytest.mark.paced]

PARTITIONS = 4
# Small session limits (turns closed early, identities forgotten, pending messages refused):
# entries are made and dropped at every checkpoint, and checkpoints come every 200 ms.
LIMITS = {
    "STREAM_APP_MAX_PENDING_MESSAGES": "40",
    "STREAM_APP_MAX_OPEN_TURNS": "6",
    "STREAM_APP_MAX_REMEMBERED_IDENTITIES": "50",
    "STREAM_APP_COMMIT_INTERVAL_MS": "200",
    "STREAM_APP_STANDBY_REPLICAS": "1",
}
# How long the input is published for: the cycles go on while it is (about 22 s each).
PUBLISHING_SECONDS = 180.0
RECORDS = 19_000
# Sessions live through the whole run: what a standby table lacks is still in use when
# the table is promoted.
SESSIONS = 1_500


class Publisher(threading.Thread):
    """Publishes the lines in order, a chunk at a time, over about ``seconds``."""

    def __init__(
        self, bootstrap: str, lines: list[dict[str, Any]], topics: dict[str, str], seconds: float
    ) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.lines, self.seconds = bootstrap, lines, seconds
        self.names = {
            "messages": topics["STREAM_APP_TOPIC_MESSAGES"],
            "decisions": topics["STREAM_APP_TOPIC_DECISIONS"],
        }
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            chunks = int(self.seconds / 0.5)
            size = -(-len(self.lines) // chunks)
            due = time.monotonic()
            for start in range(0, len(self.lines), size):
                publish(self.bootstrap, self.lines[start : start + size], self.names)
                due += 0.5
                time.sleep(max(0.0, due - time.monotonic()))
        except BaseException as exc:  # the test raises it
            self.error = exc


def assignments(worker: WorkerProcess) -> list[list[str]]:
    """The sessions partitions of each of the worker's assignments so far, in order."""
    if not worker.log.exists():
        return []
    return [
        orjson.loads(line)["partitions"]
        for line in worker.log.read_text().splitlines()
        if line.startswith("{") and '"partitions_assigned"' in line
    ]


def outline(turn: dict[str, Any] | None) -> str:
    """A turn's decisions (by id) and messages (by role): what a difference is told by."""
    if turn is None:
        return "no turn"
    decisions = [d["decision_id"] for d in turn["decisions"]]
    messages = [m["role"] for m in turn["new_messages"]]
    return f"decisions {decisions}, messages {messages}"


def dump_changelogs(bootstrap: str, app_id: str, sessions: list[str], path: Path) -> None:
    """Every changelog record of ``sessions``, in offset order: what a failure is read from."""
    from confluent_kafka import Consumer, TopicPartition

    prefixes = {s: (s.encode(), orjson.dumps([s])[:-1] + b",") for s in sessions}
    with path.open("w") as out:
        for partition in sorted({partition_for(s.encode(), PARTITIONS) for s in sessions}):
            for table in ("sessions", "entries", "turn_bodies", "decisions"):
                consumer = Consumer(
                    {
                        "bootstrap.servers": bootstrap,
                        "group.id": "post-mortem",
                        "enable.auto.commit": False,
                        "enable.partition.eof": True,
                    }
                )
                topic = f"{app_id}-{table}-changelog"
                consumer.assign([TopicPartition(topic, partition, 0)])
                while (msg := consumer.poll(5)) is not None and msg.error() is None:
                    key = msg.key() or b""
                    if any(key == k or key.startswith(p) for k, p in prefixes.values()):
                        value = msg.value()
                        shown = None if value is None else value[:300].decode(errors="replace")
                        out.write(f"{topic}@{msg.offset()} {key.decode()} {shown}\n")
                consumer.close()


def test_standby_tables_built_through_kills_restarts_and_empty_workers_lose_nothing(
    broker: EmbeddedBroker, workdir: Path
) -> None:
    run = uuid.uuid4().hex[:8]
    topics = {
        "STREAM_APP_ID": f"app-{run}",
        "STREAM_APP_TOPIC_MESSAGES": f"messages-{run}",
        "STREAM_APP_TOPIC_DECISIONS": f"decisions-{run}",
        "STREAM_APP_TOPIC_TURNS": f"turns-{run}",
        "STREAM_APP_TOPIC_DLQ": f"dlq-{run}",
    }
    names = [topics[f"STREAM_APP_TOPIC_{t}"] for t in ("MESSAGES", "DECISIONS", "TURNS", "DLQ")]
    create_topics(broker.bootstrap, names, PARTITIONS)
    lines = list(generate(records=RECORDS, sessions=SESSIONS, seed=44))
    expected, expected_letters = replayed(
        lines,
        topics,
        max_pending_messages=int(LIMITS["STREAM_APP_MAX_PENDING_MESSAGES"]),
        max_open_turns=int(LIMITS["STREAM_APP_MAX_OPEN_TURNS"]),
        max_remembered_identities=int(LIMITS["STREAM_APP_MAX_REMEMBERED_IDENTITIES"]),
    )
    settings = {**topics, **LIMITS, "STREAM_APP_PARTITIONS": str(PARTITIONS)}
    workers: list[WorkerProcess] = []
    numbers = itertools.count()

    def worker() -> WorkerProcess:
        """A worker of a name (so a data directory) of its own."""
        workers.append(WorkerProcess(broker, settings, workdir, f"w{next(numbers)}"))
        return workers[-1]

    turns = TopicReader(broker.bootstrap, topics["STREAM_APP_TOPIC_TURNS"], PARTITIONS)
    dlq = TopicReader(broker.bootstrap, topics["STREAM_APP_TOPIC_DLQ"], PARTITIONS)
    publisher = Publisher(broker.bootstrap, lines, topics, PUBLISHING_SECONDS)
    rnd = random.Random(44)

    def reassigned(w: WorkerProcess, before: int, what: str) -> None:
        turns.wait_until(lambda: len(assignments(w)) > before, 60, what)

    def owns_all(w: WorkerProcess, what: str) -> None:
        turns.wait_until(lambda: len((assignments(w) or [[]])[-1]) == PARTITIONS, 60, what)

    started = time.monotonic()
    cycles = 0
    try:
        a, b = worker().start(), worker().start()
        reassigned(a, 0, "A's first assignment")
        reassigned(b, 0, "B's first assignment")
        publisher.start()
        turns.wait_until(lambda: len(turns.records) >= 300, 120, "progress")
        while publisher.is_alive():
            before = len(assignments(a))
            a.kill()
            a.start()
            reassigned(a, before, "A's restart to be assigned")
            time.sleep(rnd.uniform(0.3, 0.5))  # the timing: B dies while A recovers
            b.kill()
            owns_all(a, "A to take B's partitions over from its standby tables")
            c = worker().start()  # on an empty data directory
            reassigned(c, 0, "C's first assignment")
            before = len(assignments(b))
            b.start()
            reassigned(b, before, "B's restart to be assigned")
            # A and B stop for good: C takes every partition over, from the standby tables
            # it has just built among them; a worker on an empty directory joins it, and
            # is the next cycle's A (restarted with what little it has written), C its B.
            a.kill()
            b.kill()
            owns_all(c, "C to take every partition over")
            a, b = worker().start(), c
            reassigned(a, 0, "the new worker's first assignment")
            cycles += 1
        publisher.join()
        assert publisher.error is None, publisher.error
        want = unstamp(expected)
        deadline = time.monotonic() + 90
        while unstamp(final_turns(turns)) != want and time.monotonic() < deadline:
            turns.poll()
        got = unstamp(final_turns(turns))
        if got != want:
            wrong = sorted(k for k in want.keys() | got.keys() if want.get(k) != got.get(k))
            post_mortem = workdir / "changelogs.txt"
            dump_changelogs(
                broker.bootstrap,
                topics["STREAM_APP_ID"],
                sorted({orjson.loads(k)[0] for k in wrong})[:20],
                post_mortem,
            )
            revisions = Counter(k.decode() for _, k, _ in turns.records if k is not None)
            raise AssertionError(
                f"after {cycles} cycles, {len(wrong)} final turns differ from replay's "
                f"(their changelog records: {post_mortem}): "
                + "; ".join(
                    f"{k} in {revisions[k]} revisions: want {outline(want.get(k))}, "
                    f"got {outline(got.get(k))}"
                    for k in wrong[:5]
                )
            )
        for _, _, value in turns.records:
            if value is not None:
                assert_valid_turn(orjson.loads(value))
        dlq.wait_until(
            lambda: letters(dlq.values()) == expected_letters, 60, "replay's dead letters"
        )
    finally:
        for w in workers:
            if w.process is not None and w.process.poll() is None:
                w.kill()
        turns.close()
        dlq.close()
        print(f"\n{cycles} cycles, {time.monotonic() - started:.0f} s")

"""Issue 54 on a real broker: a worker of release 31bff95 replaced by today's, its data
directory kept or wiped, and state of a newer format refused by today's worker.

The old release runs from ``git archive`` of its commit (this repository's history), on the
same environment: its dependencies are today's, which it shares.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.workload import generate
from stream_app.broker.embedded import EmbeddedBroker
from tests.test_app import Pipeline, replayed, unstamp
from tests.test_final_topic import PROMISED_DELAY, final_after_on_turns, final_topic, once_each
from tests.worker_process import WorkerProcess

pytestmark = pytest.mark.broker

ROOT = Path(__file__).resolve().parents[1]
OLD = "31bff95"
WINDOW = 45.0  # the old release's turns wait for the rest of the input


@pytest.fixture(scope="module")
def old_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The old release's ``stream_app`` package, from this repository's history."""
    found = subprocess.run(
        ["git", "-C", str(ROOT), "archive", OLD, "stream_app"], capture_output=True, timeout=60
    )
    if found.returncode != 0:  # a clone without history: nothing to upgrade from
        pytest.skip(f"commit {OLD} is not in this clone: {found.stderr.decode()[:200]}")
    where = tmp_path_factory.mktemp("old-release")
    with tarfile.open(fileobj=io.BytesIO(found.stdout)) as archive:
        archive.extractall(where, filter="data")
    return where


def old_worker(pipeline: Pipeline, release: Path) -> WorkerProcess:
    """A worker of the old release, under the name (and data directory) today's will take."""
    worker = pipeline.worker()
    # Its package first on the path, never the checkout's (the cwd) or the installed one.
    worker.env = {**worker.env, "PYTHONPATH": str(release), "PYTHONSAFEPATH": "1"}
    return worker


@pytest.mark.parametrize("data_dir", ["kept", "wiped"])
def test_a_worker_of_the_old_release_replaced_by_todays_loses_nothing(
    pipeline: Pipeline, old_release: Path, data_dir: str
) -> None:
    with final_topic(pipeline, WINDOW) as finals:
        lines = list(generate(records=400, sessions=16, seed=54))
        half = len(lines) // 2
        expected, expected_letters = replayed(lines, pipeline.topics)
        first_half, _ = replayed(lines[:half], pipeline.topics)
        old = old_worker(pipeline, old_release)
        old.start().wait_ready(90)
        pipeline.publish(lines[:half])
        pipeline.turns.wait_until(
            lambda: {k.decode() for _, k, _ in pipeline.turns.records if k} >= set(first_half),
            60,
            "the old release's turns",
        )
        old.stop()
        finals.poll()
        assert not finals.records, "a turn went final under the old release: stopped too late"
        assert (
            "0.1.0"
            in subprocess.run(  # it was the old release that ran
                [sys.executable, "-m", "stream_app", "--version"],
                env=old.env,
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout
        )
        # The old release's final_after of each turn, as its latest revision says it.
        final_after = final_after_on_turns(pipeline, {k.encode() for k in first_half})
        if data_dir == "wiped":
            shutil.rmtree(old.env["STREAM_APP_DATA_DIR"])

        new = pipeline.worker()
        new.start().wait_ready(90)
        ready = time.time()
        # The rest within the old turns' window: its late decisions join them, as in replay.
        pipeline.publish(lines[half:])
        pipeline.wait_for(expected, expected_letters, timeout=120)
        finals.wait_for({k.encode() for k in expected}, timeout=WINDOW + 60)
        got = once_each(finals)
        for key, at in final_after.items():  # each old turn final within seconds of it
            assert got[key]["read_at"] >= at, key
            assert got[key]["read_at"] - max(at, ready) < PROMISED_DELAY, key
        late = [got[key]["read_at"] - max(at, ready) for key, at in final_after.items()]
        print(
            f"\n{len(final_after)} turns of {OLD} final {min(late):.2f}-{max(late):.2f} s after "
            f"their final_after (or readiness); {len(got)} turns in all, "
            f"{len(finals.records) - len(got)} identical repeats"
        )
        want = {k.encode(): turn for k, turn in unstamp(expected).items()}
        assert {k: unstamp({"t": orjson.loads(r["value"])})["t"] for k, r in got.items()} == want


def test_state_of_a_newer_format_stops_the_worker_loudly_and_changes_nothing(
    pipeline: Pipeline, broker: EmbeddedBroker
) -> None:
    """A rollback onto newer state: today's worker meets a head of a format it does not know
    (written here as a newer release would), says so and holds, deleting nothing."""
    from confluent_kafka import Producer

    from tests.kafka_io import from_the_start

    lines = list(generate(records=60, sessions=2, seed=3))
    worker = pipeline.worker()
    worker.start().wait_ready(90)
    pipeline.publish(lines)
    pipeline.turns.wait_until(lambda: len(pipeline.turns.records) > 0, 60, "a turn")
    worker.stop()
    changelog = f"{pipeline.topics['STREAM_APP_ID']}-sessions-changelog"
    reader = from_the_start(broker.bootstrap, changelog, 4, "test-newer")
    heads: list[Any] = []
    deadline = time.monotonic() + 30
    while True:  # to the end of the changelog: the last head of each session
        batch = [m for m in reader.consume(1000, 2.0) if m.error() is None]
        heads += [m for m in batch if m.value()]
        if heads and not batch:
            break
        assert time.monotonic() < deadline, "no head on the changelog"
    reader.close()
    newest = heads[-1]
    head = {**orjson.loads(newest.value()), "format": 99}
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(changelog, orjson.dumps(head), newest.key(), partition=newest.partition())
    producer.flush(10)
    shutil.rmtree(worker.env["STREAM_APP_DATA_DIR"])  # recovered from the changelog

    again = pipeline.worker()
    again.start()
    deadline = time.monotonic() + 90
    while "state_format_newer" not in again.log.read_text():
        assert time.monotonic() < deadline, again.log.read_text()[-3000:]
        assert again.process is not None and again.process.poll() is None
        time.sleep(0.1)
    assert again.status("/ready") == 503
    assert again.status("/health") == 200  # alive: a restart would meet the same state
    text = again.log.read_text()
    assert text.count('"event":"state_format_newer"') == 1
    assert '"format":99' in text and '"known_format":2' in text
    reader = from_the_start(broker.bootstrap, changelog, 4, "test-newer-after")
    after: list[Any] = []
    while batch := [m for m in reader.consume(1000, 2.0) if m.error() is None]:
        after += batch
    reader.close()
    last = [m for m in after if m.key() == newest.key()][-1]
    assert orjson.loads(last.value())["format"] == 99, "the newer head was rewritten"


def test_a_worker_of_the_old_release_and_one_of_todays_side_by_side_lose_nothing(
    pipeline: Pipeline, old_release: Path
) -> None:
    """A rolling update half-way, whichever is the leader: every tick, sweep and forwarded
    input of one is applied by the other (no schema dead letter of an internal record), and
    every turn goes final once, equal to replay."""
    with final_topic(pipeline, 15.0) as finals:
        lines = list(generate(records=600, sessions=24, seed=541))
        expected, expected_letters = replayed(lines, pipeline.topics)
        old = old_worker(pipeline, old_release)
        old.start().wait_ready(90)
        new = pipeline.worker("new")
        new.start().wait_ready(90)
        old.wait_ready(90)
        pipeline.publish(lines)
        pipeline.wait_for(expected, expected_letters, timeout=120)
        finals.wait_for({k.encode() for k in expected}, timeout=15.0 + 60)
        got = once_each(finals)
        want = {k.encode(): turn for k, turn in unstamp(expected).items()}
        assert {k: unstamp({"t": orjson.loads(r["value"])})["t"] for k, r in got.items()} == want
        sessions_topic = f"{pipeline.topics['STREAM_APP_ID']}-sessions"
        assert not [d for d in pipeline.dlq.values() if d["source_topic"] == sessions_topic]


def test_a_rollback_from_todays_worker_to_the_old_release_loses_no_state(
    pipeline: Pipeline, old_release: Path
) -> None:
    """Today's state format (2) is one 31bff95 reads as its own: rolled back onto it, the old
    release reads every session (no ``state_unreadable``) and ends equal to replay."""
    with final_topic(pipeline, 45.0) as finals:
        lines = list(generate(records=400, sessions=16, seed=542))
        half = len(lines) // 2
        expected, expected_letters = replayed(lines, pipeline.topics)
        new = pipeline.worker()
        new.start().wait_ready(90)
        pipeline.publish(lines[:half])
        first_half, _ = replayed(lines[:half], pipeline.topics)
        pipeline.turns.wait_until(
            lambda: {k.decode() for _, k, _ in pipeline.turns.records if k} >= set(first_half),
            60,
            "today's turns",
        )
        new.stop()
        old = old_worker(pipeline, old_release)
        old.start().wait_ready(90)
        pipeline.publish(lines[half:])
        pipeline.wait_for(expected, expected_letters, timeout=120)
        finals.wait_for({k.encode() for k in expected}, timeout=45.0 + 60)
        got = once_each(finals)
        want = {k.encode(): turn for k, turn in unstamp(expected).items()}
        assert {k: unstamp({"t": orjson.loads(r["value"])})["t"] for k, r in got.items()} == want
        assert "state_unreadable" not in old.log.read_text()

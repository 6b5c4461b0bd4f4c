"""``python -m bench --bootstrap``: the whole benchmark on a cluster of the user's, which it
leaves as it found it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
from confluent_kafka.admin import AdminClient

from stream_app.embedded_broker import WORKER_SETTINGS, EmbeddedBroker
from tests.kafka_io import create_topics

ROOT = Path(__file__).resolve().parent.parent


def _topics(bootstrap: str) -> set[str]:
    """The cluster's topics, as an independent client (librdkafka) lists them."""
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics)


def test_the_bench_runs_on_the_given_cluster_and_deletes_only_the_topics_it_made(
    broker: EmbeddedBroker,
) -> None:
    create_topics(broker.bootstrap, ["a-topic-of-the-users"], 1)
    before = _topics(broker.bootstrap)
    small = ["--records", "600", "--worker-records", "600", "--latency-seconds", "1"]
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--bootstrap", f"kafka://{broker.bootstrap}", *small],
        cwd=ROOT,
        # The user's settings for their cluster, which the workers and peers run with: this
        # one is tansu, which needs WORKER_SETTINGS's.
        env={**os.environ, **WORKER_SETTINGS},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # What it deleted it listed on the given cluster: each measurement made its topics
    # there, (a), (b) x1 and x2, (d), (f) and (g), the apps' changelogs among them.
    deleted = {
        line.split("deleted topic ", 1)[1]
        for line in done.stdout.splitlines()
        if "deleted topic " in line
    }
    assert all(name.startswith("bench-") for name in deleted), deleted
    assert len({name.split("-")[1] for name in deleted}) == 6, sorted(deleted)
    assert sum(name.endswith("-entries-changelog") for name in deleted) == 3  # x1, x2, (d)
    assert any(name.endswith("-latest-changelog") for name in deleted)  # the naive peer's
    assert _topics(broker.bootstrap) == before
    written = ROOT / done.stdout.rsplit("written to ", 1)[1].strip()
    result = orjson.loads(written.read_bytes())
    written.unlink()
    assert result["machine"]["broker"] == broker.bootstrap
    assert result["worker_x1"]["changelog_records"] > 0
    assert result["latency_half_load"]["samples"] > 0
    assert "broker_cores_first_last_5s" not in result["latency_half_load"]  # not ours to meter
    assert "broker cores" not in done.stdout

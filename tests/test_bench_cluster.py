"""``python -m bench --bootstrap``: the benchmark on a cluster of the user's, which it leaves
as it found it; ``--workers``: its scaling table."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka.admin import AdminClient

from stream_app.broker.embedded import WORKER_SETTINGS, EmbeddedBroker
from tests.kafka_io import create_topics

ROOT = Path(__file__).resolve().parent.parent


def _topics(bootstrap: str) -> set[str]:
    """The cluster's topics, as an independent client (librdkafka) lists them."""
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics)


def _bench(broker: EmbeddedBroker, *options: str) -> tuple[str, dict[str, Any]]:
    """``python -m bench --bootstrap`` the broker: what it printed and the results it wrote."""
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--bootstrap", f"kafka://{broker.bootstrap}", *options],
        cwd=ROOT,
        # The user's settings for their cluster, which the workers and peers run with: this
        # one is tansu, which needs WORKER_SETTINGS's.
        env={**os.environ, **WORKER_SETTINGS},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    written = ROOT / done.stdout.rsplit("written to ", 1)[1].strip()
    result = orjson.loads(written.read_bytes())
    written.unlink()
    assert result["machine"]["broker"] == broker.bootstrap
    return done.stdout, result


def test_the_bench_runs_on_the_given_cluster_and_deletes_only_the_topics_it_made(
    broker: EmbeddedBroker,
) -> None:
    create_topics(broker.bootstrap, ["a-topic-of-the-users"], 1)
    before = _topics(broker.bootstrap)
    small = ["--records", "600", "--worker-records", "600", "--latency-seconds", "1"]
    out, result = _bench(broker, *small)
    # What it deleted it listed on the given cluster: each measurement made its topics
    # there, (a), (b) x1 and x2, (d), (f) and (g), the apps' changelogs among them.
    deleted = {line.split("deleted topic ", 1)[1] for line in out.splitlines() if "deleted" in line}
    assert all(name.startswith("bench-") for name in deleted), deleted
    assert len({name.split("-")[1] for name in deleted}) == 6, sorted(deleted)
    assert sum(name.endswith("-entries-changelog") for name in deleted) == 3  # x1, x2, (d)
    assert any(name.endswith("-latest-changelog") for name in deleted)  # the naive peer's
    assert _topics(broker.bootstrap) == before
    assert [m["workers"] for m in result["workers"]] == [1, 2]
    assert result["workers"][0]["changelog_records_per_record"] > 0
    assert result["latency_half_load"]["samples"] > 0
    assert all(result["faust"][kind]["records_per_s"] > 0 for kind in ("passthrough", "table"))


def test_workers_prints_the_scaling_table_of_each_count(broker: EmbeddedBroker) -> None:
    out, result = _bench(broker, "--workers", "2,1", "--worker-records", "300", "--sessions", "20")
    one, two = result["workers"]
    assert (one["workers"], two["workers"]) == (1, 2) and result["worker_records"] == 300
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("workers  records/s"))
    rows = [line.split() for line in lines[header + 1 :] if line.strip()[:1].isdigit()]
    assert [row[0] for row in rows] == ["1", "2"]
    assert rows[0][3] == "1.00"  # the efficiency: the rate per worker against one worker's
    efficiency = two["records_per_s"] / 2 / one["records_per_s"]
    assert rows[1][3] == f"{efficiency:.2f}"
    assert rows[1][1] == f"{two['records_per_s']:,.0f}"
    assert all(
        m["worker_cpu_us_per_record"] > 0 and m["changelog_records_per_record"] > 0
        for m in (one, two)
    )

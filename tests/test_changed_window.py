"""Issue 55 on a real broker: a worker stopped under one late-decision window and started
under another, its data directory kept or wiped, makes every held turn final within seconds
of the instant the new window gives it, and never before."""

from __future__ import annotations

import shutil
import time

import pytest

from bench.workload import generate
from stream_app.core.revisions import read_headers
from tests.test_app import Pipeline, replayed
from tests.test_final_topic import (
    PROMISED_DELAY,
    final_after_on_turns,
    final_topic,
    latest_on_turns,
    once_each,
)

pytestmark = pytest.mark.broker


@pytest.mark.parametrize("data_dir", ["kept", "wiped"])
@pytest.mark.parametrize(
    ("before", "after"), [(120.0, 12.0), (12.0, 30.0)], ids=["shorter", "longer"]
)
def test_held_turns_go_final_at_the_instant_the_new_window_gives_them(
    pipeline: Pipeline, before: float, after: float, data_dir: str
) -> None:
    with final_topic(pipeline, before) as finals:
        lines = list(generate(records=300, sessions=12, seed=55))
        expected, _ = replayed(lines, pipeline.topics)
        worker = pipeline.worker()
        worker.start().wait_ready()
        pipeline.publish(lines)
        pipeline.turns.wait_until(
            lambda: len(latest_on_turns(pipeline)) == len(expected), 60, "every turn emitted"
        )
        worker.stop()
        finals.poll()
        assert not finals.records, "a turn went final under the first window: stopped too late"
        emitted = {  # each turn's emission instant, from its revisions' final_after
            key: at - before
            for key, at in final_after_on_turns(pipeline, {k.encode() for k in expected}).items()
        }
        if data_dir == "wiped":
            shutil.rmtree(worker.env["STREAM_APP_DATA_DIR"])

        pipeline.topics["STREAM_APP_LATE_DECISION_WINDOW_SECONDS"] = str(after)
        again = pipeline.worker()
        again.start()
        again.wait_ready(90)
        ready = time.time()
        finals.wait_for(set(emitted), timeout=after + 60)

        for key, r in once_each(finals).items():
            headers = read_headers(list(r["headers"].items()))
            assert headers is not None
            instant = emitted[key] + after
            assert abs(headers.final_after - instant) < 0.01, key  # the window in force
            assert r["read_at"] >= instant, f"{key!r} final before its new instant"
            assert r["read_at"] - max(instant, ready) < PROMISED_DELAY, key

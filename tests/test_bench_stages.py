"""``bench/stages.py``'s least core is a bound on the core only while it does the core's
work: it must emit what replay emits, every revision in order, byte for byte."""

from __future__ import annotations

import dataclasses
import io

import orjson
import pytest

from bench import stages
from bench.workload import generate
from stream_app.config import Settings
from stream_app.pipeline import Pipeline
from stream_app.replay import replay
from stream_app.state.memory import MemorySessions

NOW = 1.7e9


@pytest.mark.parametrize(
    "limits",
    [{}, {"max_open_turns": 2}],
    ids=["default limits", "two open turns (turns closed early change what is emitted)"],
)
def test_the_least_core_emits_what_replay_emits(limits: dict[str, int]) -> None:
    policy = dataclasses.replace(Settings().policy(), **limits)
    payload = [orjson.dumps(line) for line in generate(6_000, 30, seed=5)]
    turns = io.BytesIO()
    pipeline = Pipeline(policy, MemorySessions(), clock=lambda: NOW)
    replay(payload, Settings(), turns, io.BytesIO(), pipeline)
    expected = turns.getvalue().splitlines(keepends=True)
    assert len(expected) > 2_000  # the workload completes turns and revises them
    assert stages.least(payload, now=NOW, policy=policy) == expected


def test_the_report_puts_the_least_core_against_the_reference() -> None:
    stage_rows = [("the core, all stages", 40.0)]
    text = stages.report(stage_rows, core=25_000, naive=50_000, bare=100_000, least=60_000)
    assert "60,000 records/s, 1.20x the reference, 6.7 µs/record above the floor" in text

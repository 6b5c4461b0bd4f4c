"""The worker's HTTP surface: /metrics moves exactly as the records require, /sessions/{id}."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from stream_app.broker.embedded import EmbeddedBroker
from tests.kafka_io import final_turns
from tests.test_app import Pipeline, assigned, session_lines

pytestmark = pytest.mark.broker


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_counters_move_exactly_as_the_example_requires(
    broker: EmbeddedBroker, topics: dict[str, str], workdir: Path
) -> None:
    p = Pipeline(broker, topics, workdir, input_partitions=1)
    try:
        lines = session_lines()
        worker = p.worker()
        worker.start().wait_ready()
        # Messages first, then decisions: every decision arrives after its turn.
        p.publish([line for line in lines if line["topic"] == "messages"])
        p.turns.wait_until(lambda: len(final_turns(p.turns)) == 4, 60, "4 turns")
        p.publish([line for line in lines if line["topic"] == "decisions"])
        p.turns.wait_until(lambda: len(p.turns.records) == 6, 60, "2 revisions")
        p.dlq.wait_until(lambda: len(p.dlq.records) == 4, 60, "4 dead letters")

        m = scrape(worker.port)
        messages, decisions = (
            topics["STREAM_APP_TOPIC_MESSAGES"],
            topics["STREAM_APP_TOPIC_DECISIONS"],
        )
        assert m[("stream_app_records_total", (("topic", messages),))] == 12
        assert m[("stream_app_records_total", (("topic", decisions),))] == 5
        assert m[("stream_app_turns_emitted_total", ())] == 4
        assert m[("stream_app_turn_revisions_total", ())] == 2
        assert m[("stream_app_duplicates_total", (("kind", "decision"),))] == 1
        assert ("stream_app_duplicates_total", (("kind", "message"),)) not in m
        for reason in ("invalid_json", "schema", "tenant_mismatch", "unattributable_decision"):
            assert m[("stream_app_dead_letters_total", (("reason", reason),))] == 1, reason
        # Every reason's series exists from the start: an increase() alert sees the first.
        for reason in ("too_large", "orphaned_decision", "turn_too_large"):
            assert m[("stream_app_dead_letters_total", (("reason", reason),))] == 0, reason
        assert m[("stream_app_parts_skipped_total", ())] == 1
        assert m[("stream_app_malformed_tool_arguments_total", ())] == 0
        assert m[("stream_app_sessions", ())] == 1
        assert m[("stream_app_turn_latency_seconds_count", ())] == 4
        assert m[("stream_app_consumer_lag", (("partition", "0"), ("topic", messages)))] == 0

        with urllib.request.urlopen(
            f"http://127.0.0.1:{worker.port}/sessions/sess-7f3a", timeout=5
        ) as r:
            state = json.loads(r.read())
        assert state["session_id"] == "sess-7f3a"
        assert [t[0]["inference_call_id"] for t in state["turns"]] == [
            "msg-a1",
            "msg-a2",
            "msg-a3",
            "msg-a4",
        ]
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"http://127.0.0.1:{worker.port}/sessions/nope", timeout=5)
        assert missing.value.code == 404
        assert worker.status("/health") == 200
    finally:
        p.close()


def test_a_session_is_answered_by_its_owner_whichever_worker_is_asked(pipeline: Pipeline) -> None:
    p = pipeline
    first, second = p.worker("first").start(), p.worker("second").start()
    first.wait_ready()
    second.wait_ready()
    p.turns.wait_until(
        lambda: bool(assigned(first)) and bool(assigned(second)),
        60,
        "both workers to own partitions",
    )
    p.publish([line for line in session_lines() if line["topic"] == "messages"])
    p.turns.wait_until(lambda: len(final_turns(p.turns)) == 4, 60, "4 turns")
    answers = []
    for worker in (first, second):
        with urllib.request.urlopen(
            f"http://127.0.0.1:{worker.port}/sessions/sess-7f3a", timeout=10
        ) as r:
            answers.append(json.loads(r.read()))
    assert answers[0] == answers[1]
    assert answers[0]["session_id"] == "sess-7f3a" and len(answers[0]["turns"]) == 4


def test_every_count_of_the_core_has_its_series_or_is_replays_alone() -> None:
    # One vocabulary (core/counts.py): a count the core adds without a series would move
    # nothing an operator can see.
    from stream_app.core.counts import Count
    from stream_app.observability import metrics

    assert set(metrics.SERIES) == set(Count)
    replay_only = {c for c, series in metrics.SERIES.items() if series is None}
    # (Records read by kind are replay's own counts, ``InputKind.read``, not the core's.)
    assert replay_only == {
        Count.SESSIONS_IN_STATE,
        Count.PENDING_REPLACED,  # terms of replay's equation only
        Count.HELD_BY_TOO_LARGE,
    }

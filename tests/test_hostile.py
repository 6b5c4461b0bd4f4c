"""Issue 10, a standing guard: 20,400 hostile records mixed with valid sessions through one
running worker on the embedded broker (SPEC §6: a bad record never stops the worker, never
corrupts a session, never reaches a Turn, and every input record ends in exactly one of
contributed, counted duplicate or dead letter).

The hostile records (``tests/hostile.py``) cover every category of issue 10: invalid JSON,
non-UTF-8 bytes, tombstones, records over ``STREAM_APP_MAX_RECORD_BYTES``, records whose
dead letter would be many times their size once JSON-escaped (values cut at the 512 KiB cap,
keys cut at 16 KiB), schema failures, out-of-range instants, over-deep nesting, numbers past
64 bits, over-long ids, tenant mismatches, valid sessions whose ids hold NUL, quotes,
backslashes and any Unicode, decisions with a null ``call_id`` and decisions whose
``call_id`` names nothing. A quarter of the records that are rejected before state are aimed
at valid sessions (their ids, keys, inference-call and tool-call ids).
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.workload import generate
from stream_app.broker.embedded import EmbeddedBroker
from stream_app.cli.replay import records as replay_records
from stream_app.config import Settings
from stream_app.core.dead_letter import DEAD_LETTER_MAX_BYTES
from stream_app.core.records import Outputs, SourceRecord
from stream_app.state.memory import MemorySessions
from stream_app.worker.pipeline import Pipeline as CorePipeline
from tests.contracts import assert_valid_turn, assert_valid_turn_key, validator
from tests.hostile import (
    CONTRIBUTED,
    Record,
    from_line,
    hostile_records,
    interleave,
    publish_records,
)
from tests.kafka_io import TopicReader, final_turns
from tests.test_app import PARTITIONS, Pipeline, letters, replayed, unstamp
from tests.test_metrics import scrape
from tests.worker_process import WorkerProcess

pytestmark = pytest.mark.broker

ORG_ID = "default"
MAX_RECORD_BYTES = 96 * 1024  # too_large records are cheap; a 90 KB value still escapes past
# the dead letter's 512 KiB cap (6 bytes per control character), so it is cut
VALID_RECORDS, VALID_SESSIONS = 6_000, 200
# Dead letters that stand for one input record each. The others are not expected here and
# are asserted absent: orphaned_decision (a session expiring: the TTL is a day) and
# turn_too_large (from a message that contributed).
RECORD_REASONS = (
    "invalid_json",
    "schema",
    "tenant_mismatch",
    "too_large",
    "unattributable_decision",
    "ambiguous_decision",
)


def session_of(key: str) -> str:
    return str(orjson.loads(key)[0])


def contributed(outputs: list[Outputs]) -> int:
    """Records whose final fate is to contribute: outcome ``contributed``, less decisions
    that a later turn took back out into the DLQ as ``ambiguous_decision``."""
    n = sum(out.outcome == CONTRIBUTED for out in outputs)
    taken_back = sum(
        letter["reason"] == "ambiguous_decision"
        for out in outputs
        if out.outcome != "dead_lettered"
        for letter in out.dead_letters
    )
    return n - taken_back


def reference(mixed: list[Record], settings: Settings) -> tuple[dict, list[dict], Counter]:
    """The core as replay drives it, in-process, over the whole mix (raw records, as replay
    lines cannot hold tombstones or non-UTF-8 bytes): final turns, dead letters, counts.
    Each record's fate is checked against its label on the way."""
    core = CorePipeline(settings.policy(), MemorySessions())
    offsets: Counter[str] = Counter()
    final: dict[str, dict] = {}
    dead: list[dict[str, Any]] = []
    counts: Counter[str] = Counter()
    for record in mixed:
        topic = settings.topic_of(record.topic)
        source = SourceRecord(record.topic, topic, 0, offsets[topic], record.key, record.value)
        offsets[topic] += 1
        out = core.process(source)
        if record.expect is not None:
            fate = out.dead_letters[0]["reason"] if out.outcome == "dead_lettered" else out.outcome
            assert fate == record.expect, (
                f"{record.category} record ends as {fate}, not {record.expect}: "
                f"key {record.key!r:.200} value {record.value!r:.300} "
                f"{[d['error'] for d in out.dead_letters]}"
            )
        for revision in out.turns:
            final[revision.key] = revision.turn
        dead += out.dead_letters
        counts.update(out.counts)
    return final, dead, counts


def identities(dead: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    """``letters`` with a cut value stood for by its original length and sha256: how much
    of it fits depends on the widths of the partition and offset beside it."""
    return letters(
        [
            d | {"value": (d["original_length"], d["original_sha256"])}
            if "original_sha256" in d
            else d
            for d in dead
        ]
    )


def checked_when_new(reader: TopicReader, check: Callable[[], bool]) -> Callable[[], bool]:
    """``check`` evaluated only when the reader has read something since it last ran."""
    seen = -1

    def done() -> bool:
        nonlocal seen
        if len(reader.records) == seen:
            return False
        seen = len(reader.records)
        return check()

    return done


def test_twenty_thousand_hostile_records_never_stop_the_worker_nor_touch_a_valid_session(
    broker: EmbeddedBroker, topics: dict[str, str], workdir: Path, pipeline: Pipeline
) -> None:
    """Asserted, with the worker run once and never restarted:

    1. the worker lives through all of it: the same process (PID) from start to end, alive
       and healthy, one ``startup`` line and no ``crash`` line nor traceback in its log;
    2. the accounting is exact, from ``/metrics``: ``stream_app_records_total`` (by input
       topic) equals the records published, and equals contributed + duplicates + dead
       letters, where duplicates are ``stream_app_duplicates_total`` (all kinds) and dead
       letters ``stream_app_dead_letters_total`` (all reasons; each stands for one input
       record, as no session expires and no turn is too large, both asserted). There is no
       counter of contributed records, so that term is computed by another route: the
       hostile records labelled ``contributed`` by their generator (strange-id sessions,
       orphan decisions) plus the valid records whose replay outcome is ``contributed``.
       Each term is also pinned on its own: dead letters per reason equal the generator's
       labels plus the valid records' replay, and equal the DLQ topic read back record by
       record; duplicates per kind equal the valid records' replay (hostile records make
       none); ``stream_app_reprocessed_total`` is 0; turns emitted equal the distinct turn
       keys read, and emitted + revisions equal the turn records read;
    3. the valid sessions' final turns equal ``stream-app replay`` of the valid records
       alone (the hostile records, those aimed at valid sessions included, change none),
       and every final turn (strange-id sessions too) equals the in-process core over the
       whole mix; the DLQ holds exactly that run's dead letters (up to partition, offset and
       time), each valid against dead-letter.v1.json and within the 512 KiB cap;
    4. every turn record emitted validates against turn.v1.json and its key against
       turn-key.v1.json.
    """
    started = time.monotonic()
    valid_lines = list(generate(records=VALID_RECORDS, sessions=VALID_SESSIONS, seed=23))
    valid_sessions = {line["key"] for line in valid_lines}
    sequences = hostile_records(valid_lines, ORG_ID, MAX_RECORD_BYTES, seed=10)
    hostile = [r for seq in sequences for r in seq]
    categories = Counter(r.category for r in hostile)
    assert len(hostile) >= 20_000 and min(categories.values()) >= 300, categories
    targeted = sum(r.targeted for r in hostile)
    assert targeted >= 2_000
    mixed = interleave([[from_line(line) for line in valid_lines], *sequences], seed=10)

    settings = Settings(
        org_id=ORG_ID,
        max_record_bytes=MAX_RECORD_BYTES,
        topic_messages=topics["STREAM_APP_TOPIC_MESSAGES"],
        topic_decisions=topics["STREAM_APP_TOPIC_DECISIONS"],
    )
    # Item 3's reference: stream-app replay of the valid records alone.
    valid_final, valid_letters = replayed(valid_lines, topics)
    valid_out = list(
        replay_records((orjson.dumps(line) for line in valid_lines), settings, _core(settings))
    )
    valid_counts: Counter[str] = Counter()
    for out in valid_out:
        valid_counts.update(out.counts)
    # The whole mix in-process: fails here, before any broker work, if the core itself lets
    # a hostile record through or changes a valid session.
    final, dead, counts = reference(mixed, settings)
    want = unstamp(final)
    assert unstamp({k: t for k, t in final.items() if session_of(k) in valid_sessions}) == (
        unstamp(valid_final)
    )
    assert letters(dead) >= valid_letters
    assert counts["dead_letter:orphaned_decision"] == counts["dead_letter:turn_too_large"] == 0

    expected_reasons = Counter(r.expect for r in hostile if r.expect != CONTRIBUTED)
    for reason in RECORD_REASONS:
        expected_reasons[reason] += valid_counts[f"dead_letter:{reason}"]
    expected_reasons = +expected_reasons
    assert expected_reasons == Counter(d["reason"] for d in dead)
    expected_duplicates = {
        kind: valid_counts[f"duplicate:{kind}"] for kind in ("message", "decision")
    }
    assert expected_duplicates == {k: counts[f"duplicate:{k}"] for k in expected_duplicates}
    expected_contributed = sum(r.expect == CONTRIBUTED for r in hostile) + contributed(valid_out)
    published = Counter(r.topic for r in mixed)
    assert published.total() == (
        expected_contributed + sum(expected_duplicates.values()) + expected_reasons.total()
    )
    prepared = time.monotonic() - started

    p = pipeline
    worker = WorkerProcess(
        broker,
        {
            **topics,
            "STREAM_APP_PARTITIONS": str(PARTITIONS),
            "STREAM_APP_ORG_ID": ORG_ID,
            "STREAM_APP_MAX_RECORD_BYTES": str(MAX_RECORD_BYTES),
        },
        workdir,
    )
    p.workers.append(worker)
    worker.start().wait_ready()
    assert worker.process is not None
    pid = worker.process.pid
    t0 = time.monotonic()
    n = publish_records(
        broker.bootstrap,
        mixed,
        {
            "messages": topics["STREAM_APP_TOPIC_MESSAGES"],
            "decisions": topics["STREAM_APP_TOPIC_DECISIONS"],
        },
    )
    assert n == len(mixed)
    publishing = time.monotonic() - t0

    p.dlq.wait_until(
        lambda: len(p.dlq.records) >= expected_reasons.total() or worker_gone(worker),
        300,
        f"{expected_reasons.total()} dead letters",
    )
    assert not worker_gone(worker), tail(worker)
    turns_done = checked_when_new(
        p.turns,
        lambda: len(final_turns(p.turns)) >= len(want) and unstamp(final_turns(p.turns)) == want,
    )
    p.turns.wait_until(lambda: worker_gone(worker) or turns_done(), 300, f"{len(want)} final turns")
    assert not worker_gone(worker), tail(worker)
    messages_topic = topics["STREAM_APP_TOPIC_MESSAGES"]
    decisions_topic = topics["STREAM_APP_TOPIC_DECISIONS"]

    def metric(m: dict, name: str, label: str | None = None, value: str = "") -> float:
        return m.get((name, ((label, value),) if label else ()), 0.0)

    def counted(m: dict) -> tuple[float, float]:
        records = metric(m, "stream_app_records_total", "topic", messages_topic) + metric(
            m, "stream_app_records_total", "topic", decisions_topic
        )
        dead_letters = sum(
            v for (name, _), v in m.items() if name == "stream_app_dead_letters_total"
        )
        return records, dead_letters

    p.dlq.wait_until(
        lambda: counted(scrape(worker.port)) == (len(mixed), expected_reasons.total()),
        60,
        "the counters to settle",
    )
    processing = time.monotonic() - t0
    m = scrape(worker.port)
    p.dlq.poll(0.5)
    p.turns.poll(0.5)

    # 1. One process from start to end, alive and healthy; no crash, no restart.
    assert worker.process.pid == pid and worker.process.poll() is None, tail(worker)
    assert worker.status("/health") == 200
    log = worker.log.read_text(errors="replace")
    assert '"event":"crash"' not in log, tail(worker)
    assert log.count('"event":"startup"') == 1, tail(worker)
    assert "Traceback" not in log, tail(worker)

    # 2. Every input record ends in exactly one of contributed, duplicate, dead letter.
    records_by_topic = {
        kind: metric(m, "stream_app_records_total", "topic", topics[variable])
        for kind, variable in (
            ("messages", "STREAM_APP_TOPIC_MESSAGES"),
            ("decisions", "STREAM_APP_TOPIC_DECISIONS"),
        )
    }
    assert records_by_topic == published
    duplicates = {
        kind: metric(m, "stream_app_duplicates_total", "kind", kind)
        for kind in ("message", "decision")
    }
    reasons = Counter(
        {
            dict(labels)["reason"]: int(v)
            for (name, labels), v in m.items()
            if name == "stream_app_dead_letters_total" and v
        }
    )
    dlq = p.dlq.values()
    assert len(dlq) == len(p.dlq.records)  # no tombstone on the DLQ
    assert reasons == Counter(d["reason"] for d in dlq) == expected_reasons
    assert duplicates == expected_duplicates
    assert metric(m, "stream_app_reprocessed_total") == 0
    assert set(reasons) <= set(RECORD_REASONS)
    assert published.total() == (expected_contributed + sum(duplicates.values()) + reasons.total())

    # 3. Valid sessions exactly as replay of the valid records alone; all turns and
    # dead letters exactly as the core over the whole mix.
    got = unstamp(final_turns(p.turns))
    assert got == want
    assert {k: t for k, t in got.items() if session_of(k) in valid_sessions} == unstamp(valid_final)
    assert identities(dlq) == identities(dead)
    for (_, _, value), letter in zip(p.dlq.records, dlq, strict=True):
        assert value is not None and len(value) <= DEAD_LETTER_MAX_BYTES
        errors = list(validator("dead-letter.v1.json").iter_errors(letter))
        assert not errors, f"{errors[0].message}: {letter['reason']} {letter['error']}"
    cut = Counter(
        ("value" if "original_length" in d else "") + ("key" if "original_key_length" in d else "")
        for d in dlq
        if d.get("truncated")
    )
    assert cut["value"] >= 100 and cut["key"] >= 300, cut
    originals = {hashlib.sha256(r.value).hexdigest(): r.value for r in hostile if r.value}
    for d in dlq:
        if "original_sha256" in d:  # what a cut dead letter carries is a prefix
            original = originals[d["original_sha256"]]
            carried = (
                base64.b64decode(d["value"]) if d["encoding"] == "base64" else d["value"].encode()
            )
            assert original.startswith(carried) and len(carried) < len(original)

    # 4. Every turn record is a valid Turn under a valid key.
    for _, key, value in p.turns.records:
        assert key is not None and value is not None
        turn = orjson.loads(value)
        assert_valid_turn(turn)
        assert_valid_turn_key(key, turn, session_of(key.decode()))
    assert metric(m, "stream_app_turns_emitted_total") == len(got)
    assert metric(m, "stream_app_turns_emitted_total") + metric(
        m, "stream_app_turn_revisions_total"
    ) == len(p.turns.records)

    print(
        f"\nhostile guard: {len(hostile)} hostile records {dict(sorted(categories.items()))}"
        f" ({targeted} aimed at valid sessions) + {len(valid_lines)} valid records over "
        f"{len(valid_sessions)} sessions; "
        f"{len(got)} turns ({sum(session_of(k) in valid_sessions for k in got)} valid), "
        f"{len(p.turns.records)} turn records, dead letters {dict(sorted(reasons.items()))}"
        f", duplicates {duplicates}, contributed {expected_contributed}; truncated {cut}; "
        f"prepared in {prepared:.1f} s, published in {publishing:.1f} s, all processed "
        f"in {processing:.1f} s ({len(mixed) / processing:.0f} records/s)"
    )


def _core(settings: Settings) -> CorePipeline:
    return CorePipeline(settings.policy(), MemorySessions())


def worker_gone(worker: WorkerProcess) -> bool:
    return worker.process is None or worker.process.poll() is not None


def tail(worker: WorkerProcess) -> str:
    return worker.log.read_text(errors="replace")[-4000:]

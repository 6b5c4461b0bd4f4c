"""The worker's side of the agents' telemetry (issue 51): a big telemetry record never holds
the event loop for more than a log record between two slices (``runtime/slices.py``), and
its log records are counted once the broker has its batch, as every other count."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any, cast

import pytest
from faust.types import Message

from stream_app.checkpointing.batches import Batch
from stream_app.core.policy import Policy
from stream_app.ingest import otlp, telemetry
from stream_app.observability import metrics
from stream_app.worker.worker import Outbox, Routing, Worker
from tests.finality_model import ModelWorker, Tables
from tests.ingest.otlp_records import (
    CLAUDE_RESOURCE,
    claude_api_request,
    claude_code,
    codex,
    request,
)

TOPIC = "otlp_logs"
T0 = 1_796_000_000.0


def setup() -> Worker:
    model = ModelWorker(Tables(), Policy(org_id="Acme"), [T0])
    routing = Routing(
        "sessions", {}, 1, owned={0}, telemetry_topic=TOPIC, decisions_topic="decisions"
    )
    return Worker(model.pipeline, model.store, routing)


def telemetry_message(value: bytes, offset: int = 0) -> Message:
    return cast(
        Message,
        SimpleNamespace(
            topic=TOPIC, partition=0, offset=offset, key=None, value=value, timestamp=T0
        ),
    )


def big_record(n: int) -> bytes:
    """``n`` log records: Claude Code's decisions, their api_requests, and bad Codex ones."""
    records = []
    for i in range(n):
        if i % 3 == 0:
            records.append(claude_code(tool_use_id=f"toolu_{i}"))
        elif i % 3 == 1:
            records.append(claude_api_request())
        else:
            records.append(codex(decision="maybe"))  # an unknown verdict: a dead letter
    return request(records, CLAUDE_RESOURCE).SerializeToString()


def test_a_big_record_gives_the_loop_back_between_any_two_log_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Counted, not timed: how many log records are translated in one synchronous step of
    the agent (between two of its pauses), with a pause that always gives the loop back."""
    translated_since_pause = 0
    longest = 0
    real = telemetry._outcome

    def counting(*args: Any) -> telemetry.Outcome:
        nonlocal translated_since_pause
        translated_since_pause += 1
        return real(*args)

    monkeypatch.setattr(telemetry, "_outcome", counting)

    async def pause() -> None:
        nonlocal translated_since_pause, longest
        longest = max(longest, translated_since_pause)
        translated_since_pause = 0
        await asyncio.sleep(0)

    worker, batch = setup(), Batch()
    msg = telemetry_message(big_record(600))
    asyncio.run(worker.apply_telemetry(msg, lambda m: batch, pause))
    longest = max(longest, translated_since_pause)
    assert longest == 1
    # And the record's work is all in the batch, as ``apply`` puts it.
    assert len(batch.forward) == 200
    assert all(f.topic == "decisions" for f in batch.forward)
    (emitted,) = batch.emitted
    assert len(emitted.outputs.dead_letters) == 200


def test_a_batch_is_taken_only_once_the_record_is_translated() -> None:
    """A checkpoint may seal the open batch while the record is translated: the batch the
    record goes into is asked for once, after the last log record."""
    worker, batch, asked = setup(), Batch(), []
    paused = 0

    async def pause() -> None:
        nonlocal paused
        paused += 1
        await asyncio.sleep(0)

    def add(msg: Message) -> Batch:
        asked.append(paused)
        return batch

    asyncio.run(worker.apply_telemetry(telemetry_message(big_record(30)), add, pause))
    assert asked == [paused] and paused >= 30


def _series(name: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def test_log_records_are_counted_once_the_broker_has_the_batch() -> None:
    """A batch that failed (never observed) and its record read again: counted once."""
    worker = setup()
    outbox = Outbox(cast(Any, None), "turns", "dlq", worker.routing)
    value = big_record(3)
    name = "stream_app_telemetry_translated_total"
    before = _series(name, harness="claude-code")
    failed = Batch()
    worker.apply(telemetry_message(value), failed)  # its batch's send fails: not observed
    assert _series(name, harness="claude-code") == before
    again = Batch()
    worker.apply(telemetry_message(value), again)
    outbox.observe(again)
    assert _series(name, harness="claude-code") == before + 1
    untranslatable = "stream_app_telemetry_untranslatable_total"
    assert _series(untranslatable, event=telemetry.CODEX) >= 1


def test_a_record_that_is_no_request_is_one_dead_letter_and_counts_nothing() -> None:
    worker, batch = setup(), Batch()
    asyncio.run(
        worker.apply_telemetry(telemetry_message(b"\xff not otlp"), lambda m: batch, _no_pause)
    )
    (emitted,) = batch.emitted
    assert [d["reason"] for d in emitted.outputs.dead_letters] == [telemetry.INVALID_OTLP.value]
    assert batch.forward == []


async def _no_pause() -> None:
    return None


def test_a_large_record_is_decoded_off_the_event_loop_and_applied_as_inline(
    decode_threads: list[int],
) -> None:
    """Which thread decodes, not how long it takes: a large OTLP JSON record (as a
    Collector's ``otlp_json`` writes it) is decoded in a thread, a small protobuf one on the
    event loop; the large one's decisions and dead letters are those of one step, in order,
    and its batch is asked for once, after the last log record."""
    large = otlp.encode_json(otlp.decode(big_record(60)))
    assert telemetry.decodes_in_thread(large)
    small = big_record(3)
    assert not telemetry.decodes_in_thread(small)
    expected = Batch()
    setup().apply(telemetry_message(large), expected)  # one step, on this thread

    async def run() -> tuple[int, Batch, Batch, list[str]]:
        worker, batches, asked = setup(), (Batch(), Batch()), []

        def add(into: Batch) -> Any:
            def opened(msg: Message) -> Batch:
                asked.append(f"{msg.offset}")
                return into

            return opened

        await worker.apply_telemetry(telemetry_message(large, 0), add(batches[0]), _no_pause)
        await worker.apply_telemetry(telemetry_message(small, 1), add(batches[1]), _no_pause)
        return threading.get_ident(), *batches, asked

    decode_threads.clear()
    loop_thread, got, after, asked = asyncio.run(run())
    off_loop, on_loop = decode_threads
    assert off_loop != loop_thread and on_loop == loop_thread
    assert asked == ["0", "1"]
    assert got.forward == expected.forward and len(got.forward) == 20
    (emitted,), (wanted,) = got.emitted, expected.emitted
    assert emitted.outputs.dead_letters == wanted.outputs.dead_letters
    assert len(after.forward) == 1

"""The agents' telemetry on a running worker (issue 51, SPEC §10), with real clients: the
OpenTelemetry SDK's OTLP/HTTP exporter posting to ``/v1/logs``, and records produced to the
telemetry topic as the Collector's Kafka exporter writes them. Their verdicts join the turns
they name; the same batch twice changes nothing; bad bodies and bad records get their answer
or their dead letter; a worker SIGKILLed right after a 200 loses nothing."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Producer

from stream_app.broker.embedded import EmbeddedBroker
from tests.ingest.message_lines import a_turn
from tests.ingest.otlp_records import (
    CLAUDE_RESOURCE,
    claude_api_request,
    claude_code,
    codex,
    request,
)
from tests.kafka_io import create_topics
from tests.test_app import PARTITIONS, Pipeline
from tests.worker_process import WorkerProcess

TOKEN = "telemetry-test-token-0123456789"


@pytest.fixture
def telemetry(broker: EmbeddedBroker, topics: dict[str, str], workdir: Path) -> Iterator[Pipeline]:
    run = uuid.uuid4().hex[:8]
    topics = {**topics, "STREAM_APP_TOPIC_TELEMETRY": f"telemetry-{run}"}
    create_topics(broker.bootstrap, [topics["STREAM_APP_TOPIC_TELEMETRY"]], PARTITIONS)
    p = Pipeline(broker, topics, workdir)
    yield p
    p.close()


def post(worker: WorkerProcess, body: bytes, content_type: str, token: str | None) -> int:
    headers = {"Content-Type": content_type}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(
        f"http://127.0.0.1:{worker.port}/v1/logs", data=body, headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def decisions_of(p: Pipeline) -> dict[str, list[dict[str, Any]]]:
    """Each turn's decisions in its latest revision, by turn key."""
    p.turns.poll()
    latest: dict[str, dict[str, Any]] = {}
    for _, key, value in p.turns.records:
        if key is not None and value is not None:
            latest[key.decode()] = orjson.loads(value)
    return {key: turn["decisions"] for key, turn in latest.items()}


def wait_for_decisions(p: Pipeline, want: dict[str, int], timeout: float = 60.0) -> None:
    """Until the turn of each key holds ``want[key]`` decisions."""
    deadline = time.monotonic() + timeout
    while True:
        got = decisions_of(p)
        if all(len(got.get(key, [])) == n for key, n in want.items()):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"decisions {got} after {timeout} s; wanted {want}")
        time.sleep(0.3)


def key(session: str, call: str) -> str:
    return orjson.dumps([session, call]).decode()


def test_the_sdks_exporter_joins_each_agents_verdict_to_its_turn_once(
    telemetry: Pipeline,
) -> None:
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
    from opentelemetry.sdk.resources import Resource

    p = telemetry
    worker = p.worker()
    worker.env["STREAM_APP_WEB_TOKEN"] = TOKEN
    worker.start().wait_ready()
    p.publish(
        a_turn("sess-cc", "msg-cc", "toolu_cc")
        + a_turn("conv-cx", "msg-cx", "call_cx")
        + a_turn("win-cp", "req-cp", "tool-cp")
    )
    wait_for_decisions(p, {key("sess-cc", "msg-cc"): 0, key("win-cp", "req-cp"): 0})

    def export(service: str, session: str | None, events: list[dict[str, Any]]) -> None:
        attributes = {"service.name": service}
        if session is not None:
            attributes["session.id"] = session
        provider = LoggerProvider(resource=Resource.create(attributes))
        provider.add_log_record_processor(
            SimpleLogRecordProcessor(
                OTLPLogExporter(
                    endpoint=f"http://127.0.0.1:{worker.port}/v1/logs",
                    headers={"Authorization": f"Bearer {TOKEN}"},
                    compression=Compression.Gzip,
                )
            )
        )
        logger = provider.get_logger("agent")
        for event in events:
            logger.emit(**event)
        provider.shutdown()

    claude = {
        "body": "claude_code.tool_decision",
        "attributes": {
            "event.name": "tool_decision",
            "session.id": "sess-cc",
            "tool_use_id": "toolu_cc",
            "decision": "reject",
            "source": "user_reject",
            "event.timestamp": "2026-12-01T10:00:00.000Z",
        },
    }
    api = {"body": "claude_code.api_request", "attributes": {"session.id": "sess-cc"}}
    codex_event = {
        "attributes": {
            "event.name": "codex.tool_decision",
            "conversation.id": "conv-cx",
            "call_id": "call_cx",
            "decision": "approved",
            "source": "user",
        },
        "timestamp": 0,  # as Codex may send: the observed time stands for it
        "observed_timestamp": 1_796_000_000_000_000_000,
    }
    copilot = {
        "attributes": {
            "event.name": "copilot_chat.edit.feedback",
            "outcome": "accepted",
            "request_id": "req-cp",
            "copilot_chat.file.relative_path": "src/a.py",
        },
        "timestamp": 1_796_000_000_000_000_000,
        "observed_timestamp": 1_796_000_000_000_000_000,
    }
    export("claude-code", None, [claude, api])
    export("codex_cli_rs", None, [codex_event])
    export("copilot-chat", "win-cp", [copilot])
    want = {key("sess-cc", "msg-cc"): 1, key("conv-cx", "msg-cx"): 1, key("win-cp", "req-cp"): 1}
    wait_for_decisions(p, want)
    got = decisions_of(p)
    (cc,) = got[key("sess-cc", "msg-cc")]
    assert (cc["agent_harness"], cc["accepted"], cc["explicit"]) == ("claude-code", False, True)
    (cx,) = got[key("conv-cx", "msg-cx")]
    assert (cx["agent_harness"], cx["accepted"], cx["explicit"]) == ("codex", True, True)
    (cp,) = got[key("win-cp", "req-cp")]
    assert (cp["agent_harness"], cp["file_path"]) == ("copilot", "src/a.py")
    revisions = len(p.turns.records)

    # The same batches again (the SDK stamps an observed time on each record: given here,
    # the records are the same): counted duplicates, no new revision.
    export("claude-code", None, [claude, api])
    export("codex_cli_rs", None, [codex_event])
    export("copilot-chat", "win-cp", [copilot])
    time.sleep(3)
    p.turns.poll()
    assert len(p.turns.records) == revisions
    assert decisions_of(p) == got


def test_bad_bodies_get_their_answers_and_bad_records_their_dead_letters(
    telemetry: Pipeline,
) -> None:
    p = telemetry
    worker = p.worker()
    worker.start().wait_ready()
    body = request([claude_code()], CLAUDE_RESOURCE).SerializeToString()
    assert post(worker, b"{nope", "application/json", None) == 400
    assert post(worker, body, "text/plain", None) == 415
    assert post(worker, b"\0" * (2 << 20), "application/x-protobuf", None) == 413
    # Through the receiver: a decision event that cannot be a decision.
    bad = request([claude_code(decision="maybe"), claude_api_request()], CLAUDE_RESOURCE)
    assert post(worker, bad.SerializeToString(), "application/x-protobuf", None) == 200
    # On the topic, as a Collector would write: not a request at all.
    producer = Producer({"bootstrap.servers": p.broker.bootstrap})
    producer.produce(p.topics["STREAM_APP_TOPIC_TELEMETRY"], b"\x0a\xff\xff\xff\xff\x0f")
    assert producer.flush(30) == 0
    p.dlq.wait_until(lambda: len(p.dlq.records) >= 2, 60, "two dead letters")
    reasons = sorted(letter["reason"] for letter in p.dlq.values())
    assert reasons == ["invalid_otlp", "untranslatable_telemetry"]
    assert worker.process is not None and worker.process.poll() is None


def test_the_collectors_records_join_their_turns(telemetry: Pipeline) -> None:
    """Requests in protobuf and in OTLP JSON, produced unkeyed to the telemetry topic as the
    Collector's Kafka exporter does, one of them twice."""
    p = telemetry
    p.worker().start().wait_ready()
    p.publish(a_turn("sess-k1", "msg-k1", "toolu_k1") + a_turn("conv-k2", "msg-k2", "call_k2"))
    wait_for_decisions(p, {key("sess-k1", "msg-k1"): 0, key("conv-k2", "msg-k2"): 0})
    from stream_app.ingest import otlp

    first = request([claude_code("sess-k1", "toolu_k1"), claude_api_request("sess-k1")])
    second = request([codex("conv-k2", "call_k2", "denied")])
    producer = Producer({"bootstrap.servers": p.broker.bootstrap})
    topic = p.topics["STREAM_APP_TOPIC_TELEMETRY"]
    for value in (first.SerializeToString(), otlp.encode_json(second), first.SerializeToString()):
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    wait_for_decisions(p, {key("sess-k1", "msg-k1"): 1, key("conv-k2", "msg-k2"): 1})
    time.sleep(2)
    got = decisions_of(p)
    assert len(got[key("sess-k1", "msg-k1")]) == 1
    assert got[key("conv-k2", "msg-k2")][0]["accepted"] is False


def test_a_worker_killed_right_after_a_200_loses_nothing(telemetry: Pipeline) -> None:
    p = telemetry
    worker = p.worker()
    worker.start().wait_ready()
    p.publish(a_turn("sess-kill", "msg-kill", "toolu_kill"))
    wait_for_decisions(p, {key("sess-kill", "msg-kill"): 0})
    body = request([claude_code("sess-kill", "toolu_kill")], CLAUDE_RESOURCE).SerializeToString()
    assert post(worker, body, "application/x-protobuf", None) == 200
    worker.kill()
    worker.start().wait_ready()
    wait_for_decisions(p, {key("sess-kill", "msg-kill"): 1})

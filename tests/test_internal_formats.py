"""Issue 54, mixed versions: what workers send each other on ``<id>-sessions`` (the leader's
sweeps and ticks, inputs forwarded to their session's owner) carries its format, and a
worker ignores a record of a format newer than its own with a count, never a dead letter;
the records release 31bff95 wrote (no format header) are applied as they always were."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any, cast

import faust
import orjson
import pytest
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from faust.types import Message

from stream_app.broker.record_batches import RecordBatches
from stream_app.checkpointing.batches import Batch, Forward
from stream_app.core.counts import Count
from stream_app.core.policy import Policy
from stream_app.core.records import SourceRecord, dump_input
from stream_app.observability import metrics
from stream_app.worker.worker import (
    FORMAT_HEADER,
    FORMAT_HEADERS,
    INTERNAL_FORMAT,
    SWEEP,
    TICK,
    Outbox,
    Routing,
    Worker,
    internal_format,
)
from tests.factories import ORG, assistant, message
from tests.finality_model import ModelWorker, Tables

T0 = 1_767_261_600.0  # 2026-01-01T10:00:00Z, the instant the records below were decoded at

# Forwarded inputs exactly as release 31bff95 wrote them to <id>-sessions (its
# ``records.dump_input``, run on s1's user message u1, finishing message a1 with tool call c1,
# and decision d1 for c1, decoded at T0), with no header: format 1.
USER_MESSAGE = (
    b'{"m":["s1","id:u1",1,{"role":"user","parts":[{"type":"text","content":'
    b'"fix the bug"}],"finish_reason":null},null,86,["llm.messages",0,0,"s1"'
    b',"{\\"conversationId\\":\\"s1\\",\\"message\\":{\\"role\\":\\"ROLE_USER\\",\\"con'
    b'tent\\":[{\\"text\\":\\"fix the bug\\"}],\\"messageId\\":\\"u1\\",\\"sequence\\":'
    b'1}}","utf-8"],1767261600.0]}'
)
FINISHING_MESSAGE = (
    b'{"m":["s1","id:a1",null,{"role":"assistant","parts":[{"type":"text","c'
    b'ontent":"done"},{"type":"tool_call","id":"c1","name":"edit_file","argu'
    b'ments":{"path":"a.py"}}],"finish_reason":"stop"},"a1",164,["llm.messag'
    b'es",0,1,"s1","{\\"conversationId\\":\\"s1\\",\\"message\\":{\\"role\\":\\"ROLE_'
    b'ASSISTANT\\",\\"content\\":[{\\"text\\":\\"done\\"}],\\"toolCalls\\":[{\\"id\\":\\'
    b'"c1\\",\\"name\\":\\"edit_file\\",\\"arguments\\":\\"{\\\\\\"path\\\\\\": \\\\\\"a.py\\\\'
    b'\\"}\\"}],\\"messageId\\":\\"a1\\",\\"finishReason\\":\\"stop\\"}}","utf-8"],176'
    b"7261600.0]}"
)
DECISION = (
    b'{"d":["s1",{"decision_id":"d1","org_id":"acme","session_id":"s1","user'
    b'_id":"dev-1","agent_harness":"claude-code","file_path":"src/a.py","acc'
    b'epted":true,"explicit":true,"interaction_mode":"agent","commit_sha":nu'
    b'll,"call_id":"c1","edit_retention_score":null,"observation_delay_ms":n'
    b'ull,"occurred_at":"2026-01-01T10:00:00Z","captured_at":"2026-01-01T10:'
    b'00:01Z","raw":{}},"eba4805abf66877ade172cf4e9588c22",null,["developer.'
    b'decisions",0,0,"s1","{\\"decision_id\\":\\"d1\\",\\"session_id\\":\\"s1\\",\\"u'
    b'ser_id\\":\\"dev-1\\",\\"agent_harness\\":\\"claude-code\\",\\"file_path\\":\\"s'
    b'rc/a.py\\",\\"accepted\\":true,\\"explicit\\":true,\\"interaction_mode\\":\\"a'
    b'gent\\",\\"commit_sha\\":null,\\"call_id\\":\\"c1\\",\\"edit_retention_score\\"'
    b':null,\\"observation_delay_ms\\":null,\\"occurred_at\\":\\"2026-01-01T10:00'
    b':00Z\\",\\"captured_at\\":\\"2026-01-01T10:00:01Z\\",\\"raw\\":{},\\"org_id\\":'
    b'\\"acme\\"}","utf-8"],1767261600.0]}'
)

NEWER = ((FORMAT_HEADER, str(INTERNAL_FORMAT + 1).encode()),)
IGNORED = ("stream_app_internal_records_ignored_total", {"reason": "newer_version"})


def record(value: bytes, headers: Any = (), partition: int = 0, offset: int = 0) -> Message:
    """A record of <id>-sessions as the agent gets it (aiokafka gives headers as pairs)."""
    return cast(
        Message,
        SimpleNamespace(
            topic="sessions",
            partition=partition,
            offset=offset,
            key=None,
            value=value,
            timestamp=T0,
            headers=headers,
        ),
    )


class Setup:
    def __init__(self) -> None:
        self.clock = [T0]
        self.model = ModelWorker(Tables(), Policy(org_id=ORG), self.clock)
        self.routing = Routing("sessions", {}, 1, owned={0})
        self.worker = Worker(self.model.pipeline, self.model.store, self.routing)

    def apply(self, *records: Message) -> Batch:
        batch = Batch()
        for msg in records:
            self.worker.apply(msg, batch)
        return batch


def turns(batch: Batch) -> list[str]:
    return [r.key_bytes.decode() for out, _ in batch.emitted for r in out.turns]


def dead_letters(batch: Batch) -> list[dict[str, Any]]:
    return [dict(letter) for out, _ in batch.emitted for letter in out.dead_letters]


def counted(batch: Batch) -> dict[str, int]:
    total: dict[str, int] = {}
    for out, _ in batch.emitted:
        for name, n in out.counts.items():
            total[name] = total.get(name, 0) + n
    return total


def ignored() -> float:
    return metrics.REGISTRY.get_sample_value(*IGNORED) or 0.0


def test_the_timer_records_are_the_bytes_release_31bff95_wrote_and_reads() -> None:
    # 31bff95 compares a record's value with these bytes and never looks at its headers: a
    # record this release writes (the same bytes, a header more) is its own to it.
    assert (SWEEP, TICK) == (b'{"sweep":true}', b'{"tick":true}')
    assert FORMAT_HEADERS == [("v", b"1")] and INTERNAL_FORMAT == 1


@pytest.mark.parametrize("headers", [(), None, FORMAT_HEADERS, {"v": b"1"}, [("other", b"x")]])
def test_forwarded_inputs_of_31bff95_and_of_this_release_are_applied(headers: Any) -> None:
    setup = Setup()
    batch = setup.apply(
        record(USER_MESSAGE, headers, offset=0),
        record(FINISHING_MESSAGE, headers, offset=1),
        record(DECISION, headers, offset=2),
    )
    assert dead_letters(batch) == []
    assert Count.INTERNAL_NEWER not in counted(batch)
    # The turn was made, then revised by the decision that joined it.
    assert turns(batch) == ['["s1","a1"]'] * 2


def test_an_input_forwarded_by_this_release_carries_its_format_and_is_applied() -> None:
    built: list[bytes] = []

    class Producer:
        """aiokafka's record batches as the producer makes them, kept as built."""

        def create_batch(self) -> BatchBuilder:
            return BatchBuilder(1 << 20, 0, is_transactional=False)

        async def send_batch(self, batch: BatchBuilder, topic: str, partition: int) -> Any:
            built.append(bytes(batch._buffer))
            return asyncio.get_running_loop().create_future()

    writer = Setup()
    routing = writer.routing
    decoded = [
        writer.model.pipeline.decode(
            SourceRecord("messages", "llm.messages", 0, n, b"s1", orjson.dumps(v), T0)
        )[0]
        for n, v in enumerate(
            [message("s1", message_id="u1", sequence=1), assistant("s1", message_id="a1")]
        )
    ]
    batch = Batch()
    batch.forward += [Forward(b"s1", dump_input(item), 0, T0) for item in decoded if item]
    batch.forward.append(Forward(b"", TICK, 0, T0))  # a tick that leaves work sends another
    outbox = Outbox(cast(Any, None), "turns", "dlq", routing)
    outbox._batches = RecordBatches(Producer)  # type: ignore[arg-type]
    asyncio.run(outbox.send(batch))
    sent = [r for data in built for r in MemoryRecords(data).next_batch()]
    assert [r.value for r in sent] == [*(f.value for f in batch.forward)]
    assert [r.headers for r in sent] == [FORMAT_HEADERS] * 3

    reader = Setup()
    applied = reader.apply(*(record(r.value, r.headers) for r in sent[:2]))
    assert len(turns(applied)) == 1 and dead_letters(applied) == []


def test_31bff95s_tick_and_sweep_are_applied() -> None:
    setup = Setup()
    setup.apply(record(USER_MESSAGE), record(FINISHING_MESSAGE))
    setup.model.checkpoint()  # files s1's turn in the due index
    setup.clock[0] = T0 + Policy(org_id=ORG).late_decision_window_seconds + 60
    batch = setup.apply(record(TICK), record(SWEEP))  # no header: as 31bff95's leader sends
    assert dead_letters(batch) == []
    assert counted(batch).get(Count.TURNS_CLOSED) == 1  # the tick closed s1's turn
    assert setup.worker.finals_waiting == {0: 1}  # which waits for its checkpoint
    assert 0 in setup.worker.waited  # the sweep ran


def test_records_of_a_newer_format_are_ignored_and_counted_never_dead_letters(
    caplog: pytest.LogCaptureFixture,
) -> None:
    setup = Setup()
    setup.apply(record(USER_MESSAGE), record(FINISHING_MESSAGE))
    setup.model.checkpoint()
    setup.clock[0] = T0 + Policy(org_id=ORG).late_decision_window_seconds + 60
    before = ignored()
    newer = [
        record(TICK, NEWER),
        record(SWEEP, NEWER),
        record(DECISION, NEWER, offset=2),
        record(b'{"tick":{"by":"partition"}}', NEWER),  # bytes no release before knows
        record(b"\x00 not json", NEWER),
    ]
    batch = setup.apply(*newer)
    assert dead_letters(batch) == []
    assert turns(batch) == []  # the decision joined no turn
    assert counted(batch) == {Count.INTERNAL_NEWER: len(newer)}
    assert setup.worker.finals_waiting == {} and setup.worker.waited == {}  # no tick, no sweep
    # Counted once the broker has the batch, as every count of the worker.
    outbox = Outbox(cast(Any, None), "turns", "dlq", setup.routing)
    outbox.observe(batch)
    assert ignored() - before == len(newer)
    # One line names the format, the first time only.
    assert setup.worker.newer_formats == {INTERNAL_FORMAT + 1}
    setup.apply(record(TICK, NEWER))
    assert setup.worker.newer_formats == {INTERNAL_FORMAT + 1}

    # The tick of this release's format after them does what the ignored one did not.
    batch = setup.apply(record(TICK, FORMAT_HEADERS))
    assert counted(batch).get(Count.TURNS_CLOSED) == 1


@pytest.mark.parametrize(
    ("value", "headers"),
    [
        (b'{"sweep":false}', ()),  # no format named, and no record this app writes
        (b"garbage", FORMAT_HEADERS),
        (TICK, ((FORMAT_HEADER, b"two"),)),  # a header that names no format
        (TICK, ((FORMAT_HEADER, b"0"),)),
        (TICK, ((FORMAT_HEADER, None),)),
    ],
)
def test_a_record_no_release_writes_is_still_a_schema_dead_letter(
    value: bytes, headers: Sequence[tuple[str, bytes | None]]
) -> None:
    setup = Setup()
    before = ignored()
    batch = setup.apply(record(value, headers))
    (letter,) = dead_letters(batch)
    assert letter["reason"] == "schema" and letter["source_topic"] == "sessions"
    assert ignored() == before and Count.INTERNAL_NEWER not in counted(batch)


def test_internal_format_reads_the_header() -> None:
    assert internal_format(()) == 1 and internal_format(None) == 1  # 31bff95 wrote none
    assert internal_format([("revision", b"3")]) == 1
    assert internal_format([("v", b"1")]) == 1 and internal_format({"v": b"7"}) == 7
    assert internal_format([("v", b"x")]) is None and internal_format([("v", b"-1")]) is None


def test_the_leaders_timers_send_their_records_with_the_format(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from stream_app.app import app

    sent: list[dict[str, Any]] = []

    async def send(self: faust.Topic, **kw: Any) -> None:
        sent.append({"topic": self.get_topic_name(), **kw})

    monkeypatch.setattr(faust.Topic, "send", send)
    timers = {t.__name__: t for t in app._app_tasks}
    assert "request_sweeps" not in timers  # the tick is the one timer (issue 50)
    for name, value in (("request_ticks", TICK),):
        sent.clear()
        asyncio.run(inspect.unwrap(timers[name])())  # one round, leader or not
        assert sent, name
        for kw in sent:
            assert kw["topic"].endswith("-sessions") and kw["value"] == value
            assert internal_format(kw["headers"]) == INTERNAL_FORMAT

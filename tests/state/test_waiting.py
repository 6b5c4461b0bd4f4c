"""Issue 43 item 1, the worker's side: messages that wait for a finishing message, and
decisions that wait for their turn, are counted and named at the tick (``core/waiting.py``)
from what the heads written say waits, and the sessions changed since: never a pass over
every head (issue 50)."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any, cast

import orjson
import pytest
from faust.types import Message

from stream_app.checkpointing.batches import Batch
from stream_app.core.policy import Policy
from stream_app.core.records import SourceRecord
from stream_app.core.waiting import NAMED, WaitingSweep
from stream_app.observability import logs, metrics
from stream_app.state import entries
from stream_app.worker.worker import TICK, Routing, Worker
from tests.factories import ORG, assistant, decision, message, tool_call
from tests.finality_model import ModelWorker, Tables

T0 = 1_767_261_600.0  # 2026-01-01T10:00:00Z
MESSAGES, DECISIONS = "llm.messages", "developer.decisions"
THRESHOLD = 60.0


class Model(ModelWorker):
    """The worker's path without a broker, offsets counted by topic."""

    def __init__(self, tables: Tables, clock: list[float]) -> None:
        super().__init__(tables, Policy(org_id=ORG), clock)
        self.clock = clock

    def send(self, topic: str, value: dict[str, Any]) -> None:
        kind = "messages" if topic == MESSAGES else "decisions"
        offset = self.applied.get(topic, 0)
        self.apply(SourceRecord(kind, topic, 0, offset, None, orjson.dumps(value)))  # type: ignore[arg-type]


def head_of(tables: Tables, session_id: str) -> entries.Head:
    data = tables.heads.get(session_id.encode())
    assert data is not None
    return entries.read_head(data)


def test_a_head_says_when_the_oldest_pending_message_and_waiting_decision_arrived() -> None:
    clock, tables = [T0], Tables()
    model = Model(tables, clock)
    model.send(MESSAGES, message("s1", message_id="u1", sequence=1))
    clock[0] = T0 + 5
    model.send(MESSAGES, message("s1", message_id="u2", sequence=2))
    model.send(DECISIONS, decision("s1", "never", decision_id="d1"))
    clock[0] = T0 + 9
    model.send(DECISIONS, decision("s1", "nor-this", decision_id="d2"))
    model.checkpoint()
    head = head_of(tables, "s1")
    assert list(head["pending"]) == [T0, 2]  # the first of the two
    assert list(head["waiting"]) == [T0 + 5, 2]

    # Read back from the tables, the state knows them too (a later head says the same).
    store = ModelWorker(tables, Policy(org_id=ORG), clock).store
    state = store.get("s1")
    assert state is not None
    assert state.pending_since == T0 and state.waiting_since == T0 + 5

    # A finishing message takes the pending messages: the head no longer names any.
    clock[0] = T0 + 20
    model.send(MESSAGES, assistant("s1", message_id="a1", tool_calls=[tool_call("nor-this")]))
    model.checkpoint()
    head = head_of(tables, "s1")
    assert "pending" not in head
    assert list(head["waiting"]) == [T0 + 5, 1]  # d2 joined the turn; d1 still waits
    clock[0] = T0 + 30
    model.send(MESSAGES, message("s1", message_id="u3", sequence=3))
    model.checkpoint()
    assert list(head_of(tables, "s1")["pending"]) == [T0 + 30, 1]  # a new wait, from its own start


def test_a_head_written_before_heads_said_what_waits_still_reads() -> None:
    clock, tables = [T0], Tables()
    model = Model(tables, clock)
    model.send(MESSAGES, message("s1", message_id="u1", sequence=1))
    model.send(DECISIONS, decision("s1", "never", decision_id="d1"))
    model.checkpoint()
    # The head and the decision's entry as an older version wrote them.
    head = orjson.loads(tables.heads.data[b"s1"])
    del head["pending"], head["waiting"]
    tables.heads.data[b"s1"] = orjson.dumps(head)
    for key, value in tables.entries.data.items():
        generation, fields = orjson.loads(value)[:2]
        if orjson.loads(key)[2] == "d":
            tables.entries.data[key] = orjson.dumps([generation, fields[:3]])
    model = Model(tables, clock)
    state = model.store.get("s1")
    assert state is not None and len(state.pending_messages) == 1
    assert state.pending_since is None and state.waiting_since is None
    clock[0] = T0 + 3600
    sweep = report(model)
    assert sweep.messages.sessions == sweep.decisions.sessions == 0  # not known: not counted
    # Its next message starts the count.
    clock[0] = T0 + 3700
    model.send(MESSAGES, message("s1", message_id="u2", sequence=2))
    assert state.pending_since == T0 + 3700


def report(model: Model) -> WaitingSweep:
    """What a tick of partition 0 reports waiting, at the model's clock."""
    routing = Routing("sessions", {}, 1, owned={0})
    worker = Worker(model.pipeline, model.store, routing, waiting_warn_seconds=THRESHOLD)
    crossed: list[Any] = []
    waited = worker._waited

    def keep(partition: int, sweep: WaitingSweep) -> None:
        crossed.extend(sweep.crossed)  # which ``_waited`` logs, then lets go
        waited(partition, sweep)

    worker._waited = keep  # type: ignore[method-assign]
    worker.apply(tick_message(), Batch())
    sweep = worker.waited[0]
    sweep.crossed = crossed
    return sweep


def waiting_sessions(clock: list[float]) -> tuple[Model, Tables]:
    """s1: a user message with no finishing message (at T0); s2: a decision for a turn that
    never comes (at T0 + 30); s3: a turn made and done with; s4: a message at T0 + 100."""
    tables = Tables()
    model = Model(tables, clock)
    model.send(MESSAGES, message("s1", message_id="u1", sequence=1))
    clock[0] = T0 + 30
    model.send(DECISIONS, decision("s2", "no-such-turn", decision_id="d1"))
    model.send(MESSAGES, message("s3", message_id="u3", sequence=1))
    model.send(MESSAGES, assistant("s3", message_id="a3"))
    clock[0] = T0 + 100
    model.send(MESSAGES, message("s4", message_id="u4", sequence=1))
    return model, tables


@pytest.mark.parametrize("written", [True, False])
def test_a_tick_counts_the_sessions_waiting_past_the_threshold_and_the_oldest_age(
    written: bool,
) -> None:
    clock = [T0]
    model, _ = waiting_sessions(clock)
    if written:  # read from the heads; else from the states the store holds in memory
        model.checkpoint()
        model.store.forget_all()
        assert not model.store._live
    clock[0] = T0 + 120
    sweep = report(model)
    assert bool(model.store._live) is not written  # nothing decoded to count them
    assert (sweep.messages.sessions, sweep.messages.oldest) == (1, 120.0)  # s1, not s4
    assert (sweep.decisions.sessions, sweep.decisions.oldest) == (1, 90.0)
    assert [(c.session_id, c.kind, c.waiting, c.age) for c in sweep.crossed] == [
        ("s1", "messages", 1, 120.0),
        ("s2", "decisions", 1, 90.0),
    ]


def tick_message(partition: int = 0) -> Message:
    return cast(
        Message, SimpleNamespace(topic="sessions", partition=partition, value=TICK, headers=())
    )


def gauges() -> tuple[float | None, ...]:
    return tuple(
        metrics.REGISTRY.get_sample_value(f"stream_app_{kind}_waiting_{figure}")
        for kind in ("messages", "decisions")
        for figure in ("sessions", "oldest_seconds")
    )


class Events:
    """The event lines logged (``logs.event``), taken as they are read."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.lines: list[tuple[str, int, dict[str, Any]]] = []
        monkeypatch.setattr(logs, "event", self._event)

    def _event(self, name: str, level: int = logging.INFO, **fields: Any) -> None:
        self.lines.append((name, level, fields))

    def taken(self) -> list[tuple[str, dict[str, Any]]]:
        lines, self.lines = self.lines, []
        assert all(level == logging.WARNING for _, level, _ in lines)
        return [(name, fields) for name, _, fields in lines if name.startswith("waiting_too_long")]


def test_the_tick_logs_a_crossing_once_and_keeps_the_gauges(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events = Events(monkeypatch)
    clock = [T0]
    model, _ = waiting_sessions(clock)
    routing = Routing("sessions", {}, 1, owned={0})
    worker = Worker(model.pipeline, model.store, routing, waiting_warn_seconds=THRESHOLD)

    clock[0] = T0 + 50  # nothing past the threshold yet
    worker.apply(tick_message(), Batch())
    assert events.taken() == [] and gauges() == (0, 0, 0, 0)

    clock[0] = T0 + 95  # s1 crossed at T0 + 60, s2 at T0 + 90
    worker.apply(tick_message(), Batch())
    lines = events.taken()
    assert [
        (name, f["session_id"], f["kind"], f["waiting"], f["age_seconds"]) for name, f in lines
    ] == [
        ("waiting_too_long", "s1", "messages", 1, 95.0),
        ("waiting_too_long", "s2", "decisions", 1, 65.0),
    ]
    assert "finishReason" in lines[0][1]["hint"] and "call_id" in lines[1][1]["hint"]
    assert gauges() == (1, 95.0, 1, 65.0)

    clock[0] = T0 + 155  # still waiting: counted, not logged again; s4 crossed at T0 + 160
    worker.apply(tick_message(), Batch())
    assert events.taken() == []
    assert gauges() == (1, 155.0, 1, 125.0)

    clock[0] = T0 + 170
    worker.apply(tick_message(), Batch())
    assert [(f["session_id"], f["age_seconds"]) for _, f in events.taken()] == [("s4", 70.0)]
    assert gauges() == (2, 170.0, 1, 140.0)

    # A finishing message for s1: it no longer counts at the next tick.
    model.send(MESSAGES, assistant("s1", message_id="a1"))
    clock[0] = T0 + 180
    worker.apply(tick_message(), Batch())
    assert events.taken() == [] and gauges() == (1, 80.0, 1, 150.0)

    # The partition moves away: its figures leave the gauges; assigned again, its first
    # tick names every session past the threshold.
    routing.assigned([])
    worker.assigned()
    assert gauges() == (0, 0, 0, 0)
    routing.owned = {0}
    worker.apply(tick_message(), Batch())
    assert [f["session_id"] for _, f in events.taken()] == ["s2", "s4"]


def test_a_flood_of_crossings_is_named_up_to_a_limit_then_counted_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events = Events(monkeypatch)
    clock = [T0]
    model = Model(Tables(), clock)
    for s in range(NAMED + 7):
        model.send(MESSAGES, message(f"s{s}", message_id=f"u{s}", sequence=1))
    worker = Worker(
        model.pipeline, model.store, Routing("sessions", {}, 1, owned={0}), "dead_letter", 1.0
    )
    clock[0] = T0 + 10
    worker.apply(tick_message(), Batch())
    lines = events.taken()
    assert len(lines) == NAMED + 1
    assert lines[-1][0] == "waiting_too_long_more" and lines[-1][1]["sessions"] == 7
    assert gauges()[0] == NAMED + 7


def test_the_turns_waiting_to_go_final_leave_the_gauge_with_their_partition() -> None:
    clock = [T0]
    model, _ = waiting_sessions(clock)  # s3 has a turn, emitted at T0 + 30
    model.checkpoint()  # which files it in the due index
    routing = Routing("sessions", {}, 1, owned={0})
    worker = Worker(model.pipeline, model.store, routing, waiting_warn_seconds=THRESHOLD)
    clock[0] = T0 + Policy(org_id=ORG).late_decision_window_seconds + 60
    tick = cast(Message, SimpleNamespace(topic="sessions", partition=0, value=TICK, headers=()))
    worker.apply(tick, Batch())  # closes s3's turn: it waits for its checkpoint
    assert metrics.REGISTRY.get_sample_value("stream_app_final_waiting_turns") == 1
    routing.assigned([])
    worker.assigned()
    assert metrics.REGISTRY.get_sample_value("stream_app_final_waiting_turns") == 0

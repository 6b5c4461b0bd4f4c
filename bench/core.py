"""The core alone, no broker: (c) in-process replay's rate, (e) the state an idle session
takes, ``--stages`` and ``--bounded``; the best of rounds taken in turn (the machine is shared).

``--stages``: a stage's cost is the difference between two runs over the same records that
differ by it (parse, validate, the rest of decode, apply, and serializing what a checkpoint
writes), each run freezing what survives as replay does. ``--bounded``: µs a record for the
same records sent to one session holding 10, 1,000 and 20,000 pending messages, against
small sessions; and changelog bytes per input byte for small messages into a session near
its limits, a checkpoint after each (the worst case: each changed session written once).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import io
import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

import msgspec
import orjson

from bench.cluster import status_kib
from bench.workload import chat, decision, encoded
from stream_app.cli.replay import FREEZE_EVERY, replay
from stream_app.config import Settings
from stream_app.core import input_structs
from stream_app.core.policy import Policy
from stream_app.core.records import SourceRecord, TopicKind, turn_key
from stream_app.core.session import EmittedTurn, SessionState
from stream_app.models.decision import DecisionPayload
from stream_app.models.message import LLMMessagePublishedEvent
from stream_app.runtime import allocator
from stream_app.runtime.allocator import tune_gc
from stream_app.state import entries
from stream_app.state.memory import MemorySessions
from stream_app.state.sessions import TableSessions
from stream_app.state.written import Written
from stream_app.worker.pipeline import Pipeline

CHECKPOINT_RECORDS = 1_000  # records between two serializations of the changed sessions
SIZES = (10, 1_000, 20_000)
MEASURED = 2_000  # records timed at each size
ROUNDS = 5  # the best of, per size and layout: the machine is shared


def cpu_seconds(run: Callable[[], object]) -> float:
    """CPU seconds of ``run``, this process's (not other processes' turns on the cores)."""
    gc.collect()
    started = time.process_time()
    run()
    return time.process_time() - started


def core_rate(lines: list[dict[str, Any]], rounds: int = 3) -> tuple[float, dict[str, int]]:
    """(c) Records/s of in-process replay (CPU time, best of ``rounds``), and the final
    decision count of every turn: what the worker runs are checked against."""
    payload = [orjson.dumps(line) for line in lines]
    tune_gc()  # as `stream-app replay` does
    best = float("inf")
    for _ in range(rounds):
        turns = io.BytesIO()
        best = min(best, cpu_seconds(partial(replay, payload, Settings(), turns, io.BytesIO())))
    final: dict[str, int] = {}
    for line in turns.getvalue().splitlines():
        doc = orjson.loads(line)
        final[doc["key"]] = len(doc["value"]["decisions"])
    return len(lines) / best, final


def _source_records(lines: list[dict[str, Any]]) -> list[SourceRecord]:
    return [SourceRecord(kind, kind, 0, n, k, v) for n, (kind, k, v) in enumerate(encoded(lines))]


def _parse(records: list[SourceRecord]) -> None:
    for record in records:
        with contextlib.suppress(orjson.JSONDecodeError):  # the workload's malformed records
            orjson.loads(record.value or b"")


def _validate(records: list[SourceRecord]) -> None:
    """As intake checks a document: its Struct, and the models for what it does not take."""
    for record in records:
        try:
            doc = orjson.loads(record.value or b"")
            kind = record.kind == "messages"
            try:
                shape = input_structs.EventStruct if kind else input_structs.DecisionStruct
                msgspec.convert(doc, shape)
            except msgspec.ValidationError:
                (LLMMessagePublishedEvent if kind else DecisionPayload).model_validate(doc)
        except ValueError:  # orjson's and pydantic's errors both are
            pass


def _decode(pipeline: Pipeline, records: list[SourceRecord]) -> None:
    for record in records:
        pipeline.decode(record)  # and let go, as the core lets it go once applied


class _Journaled(MemorySessions):
    """Sessions that keep what changed for the next serialization, as the worker's do."""

    def __init__(self) -> None:
        super().__init__()
        self.written: dict[str, Written] = {}

    def put(self, state: SessionState, closed: Iterable[EmittedTurn] = ()) -> None:
        self._closed.hold(state.session_id, closed)
        if state.journal is None:
            held = self._closed.of(state.session_id).values()
            state.journal = self.written[state.session_id] = Written.whole(state, 0, held)
        self._sessions[state.session_id] = state

    def sent(self, session_id: str, key: str) -> EmittedTurn | None:
        return self._closed.take(session_id, key, self.written.get(session_id))


def _core(records: list[SourceRecord], serialize: bool) -> None:
    store = _Journaled() if serialize else MemorySessions()
    pipeline = Pipeline(Settings().policy(), store, clock=lambda: 0.0)
    changed: set[str] = set()
    for n, record in enumerate(records, 1):
        if n % FREEZE_EVERY == 0:
            allocator.freeze_survivors()  # as replay and the worker keep state from the collector
        item, _ = pipeline.decode(record)
        if item is None:
            continue
        pipeline.apply(item)
        if serialize:
            changed.add(item.session_id)
            if n % CHECKPOINT_RECORDS == 0:
                _serialize(pipeline, changed)
    if serialize:
        _serialize(pipeline, changed)


def _serialize(pipeline: Pipeline, changed: set[str]) -> None:
    """What a checkpoint serializes of each changed session: new entries, bodies, head."""
    for session_id in changed:
        state = pipeline.store.get(session_id)
        if state is None:
            continue
        assert isinstance(pipeline.store, _Journaled)
        written = pipeline.store.written[session_id]
        closed = pipeline.store.closed_of(session_id)
        change = entries.changes(state, written, (), partial(turn_key, session_id), closed)
        for value in [*change["before"].values(), *change["bodies"].values()]:
            if callable(value):
                value()
        entries.head(state, written, change["dropped"], closed=closed.values())
    changed.clear()


def stage_table(lines: list[dict[str, Any]], rounds: int = 5) -> list[tuple[str, float]]:
    """(stage, µs per record), the best of ``rounds`` for each run, the runs taken in turn
    round after round (so that a burst of the machine's noise falls on no single stage)."""
    records = _source_records(lines)
    decoding = Pipeline(Settings().policy(), MemorySessions())
    runs: dict[str, Callable[[], object]] = {
        "parse": lambda: _parse(records),
        "validate": lambda: _validate(records),
        "decode": lambda: _decode(decoding, records),
        "apply": lambda: _core(records, serialize=False),
        "serialize": lambda: _core(records, serialize=True),
    }
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(rounds):
        for name, run in runs.items():
            best[name] = min(best[name], cpu_seconds(run))
    per = {name: seconds / len(records) * 1e6 for name, seconds in best.items()}
    return [
        ("parse (orjson)", per["parse"]),
        ("validate (msgspec Structs; the models decide the rest)", per["validate"] - per["parse"]),
        ("rest of decode (translate, limits, redaction)", per["decode"] - per["validate"]),
        ("apply (assembler, collapse, state)", per["apply"] - per["decode"]),
        ("serialize the changed sessions", per["serialize"] - per["apply"]),
        ("the core, all stages", per["serialize"]),
    ]


def report(rows: list[tuple[str, float]]) -> str:
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {us:6.1f} µs/record" for name, us in rows)


def idle_session(sid: str) -> list[tuple[TopicKind, bytes]]:
    """A session of one finished call: a user message and its answer."""
    answer = chat(sid, f"{sid}-a", 2, "done", finishReason="stop")
    return [("messages", chat(sid, f"{sid}-u", 1, "fix the bug")), ("messages", answer)]


def state_footprint(sessions: int = 10_000) -> dict[str, float]:
    """(e) Idle sessions: the bytes of their serialized state and the RSS they add."""
    pipeline = Pipeline(Policy(org_id="default"), MemorySessions(), clock=lambda: 0.0)
    gc.collect()
    before = status_kib("self")
    for i in range(sessions):
        for offset, (kind, value) in enumerate(idle_session(f"idle-{i}")):
            pipeline.process(SourceRecord(kind, kind, 0, i * 10 + offset, None, value))
    gc.collect()
    grown = status_kib("self") - before
    states = [pipeline.store.get(s) for s in pipeline.store.session_ids()]
    serialized = sum(len(state.to_json()) for state in states if state is not None)
    return {
        "state_bytes": serialized / sessions,
        "rss_kib_per_10k_sessions": grown * 10_000 / sessions,
    }


def _message(session: str, i: int) -> bytes:
    """A user message of about 110 bytes."""
    return chat(session, f"m{i}", 1, "run the tests again, please")


def _measured(session_of: Callable[[int], str]) -> list[SourceRecord]:
    """New messages, copies of them (replacing in place), decisions that wait."""
    out = []
    for i in range(MEASURED):
        session = session_of(i)
        if i % 4 == 3:
            value = decision(session, f"d{i}", f"call-{i}", "2026-01-01T10:00:00Z")
            out.append(SourceRecord("decisions", "d", 0, i, None, orjson.dumps(value)))
        else:
            n = 1_000_000 + (i - i % 2 if i % 4 == 1 else i)  # every other: a copy
            out.append(SourceRecord("messages", "m", 0, i, None, _message(session, n)))
    return out


def cost(size: int) -> tuple[float, float]:
    """µs per record into one session holding ``size`` pending, and over small sessions."""
    policy = Policy(
        org_id="default",
        max_pending_messages=size + MEASURED,
        max_pending_bytes=1 << 40,
        max_waiting_decisions=MEASURED,
    )
    big = [SourceRecord("messages", "m", 1, i, None, _message("big", i)) for i in range(size)]
    layouts: list[Callable[[int], str]] = [lambda i: "big", lambda i: f"small-{i // 8}"]
    best = [float("inf")] * len(layouts)
    for _ in range(ROUNDS):
        for n, session_of in enumerate(layouts):
            pipeline = Pipeline(policy, MemorySessions(), clock=lambda: 0.0)
            for record in big:
                pipeline.process(record)
            records = _measured(session_of)
            started = time.perf_counter()
            for record in records:
                pipeline.process(record)
            elapsed = time.perf_counter() - started
            best[n] = min(best[n], elapsed / len(records) * 1e6)
    return best[0], best[1]


class _Table(dict[bytes, bytes]):
    """A table as the worker's store uses it (every write acknowledged at once), counting
    the bytes written to it."""

    bytes_written = 0

    async def put(self, key: bytes, value: bytes | None) -> None:
        self.bytes_written += len(key) + len(value or b"")
        if value is None:
            self.pop(key, None)
        else:
            self[key] = value

    async def written(self) -> None:
        pass

    def partition_for_key(self, key: bytes) -> int:
        return 0

    def keys_from(self, partition: int, prefix: bytes) -> list[bytes]:
        return [k for k in self if k.startswith(prefix)]

    def items_from(self, partition: int, prefix: bytes) -> list[tuple[bytes, bytes]]:
        return sorted((k, v) for k, v in self.items() if k.startswith(prefix))


def writes() -> dict[str, float]:
    """Changelog bytes per input byte for small messages into a session near its limits."""
    policy = Policy(org_id="default")
    tables = sessions, decisions, bodies, entries = [_Table() for _ in range(4)]
    store = TableSessions(sessions, decisions, bodies, entries, policy.max_state_record_bytes)

    async def checkpoint() -> None:
        snapshot = store.seal()
        await store.write(snapshot)
        store.settled(snapshot)

    pipeline = Pipeline(policy, store, clock=lambda: 0.0)
    values: list[bytes] = []
    for i in range(policy.max_open_turns - 10):  # open turns, each with remembered ids
        answer = chat("full", f"a{i}", 2, "done", finishReason="stop")
        values += [_message("full", len(values)), answer]
    pending = range(len(values), len(values) + policy.max_pending_messages - 20)
    values += [_message("full", i) for i in pending]  # and pending messages
    for offset, value in enumerate(values):
        pipeline.process(SourceRecord("messages", "m", 0, offset, None, value))
    asyncio.run(checkpoint())
    before = sum(t.bytes_written for t in tables)
    sent = 0
    for offset in range(len(values), len(values) + 10):
        value = _message("full", offset)
        sent += len(value)
        pipeline.process(SourceRecord("messages", "m", 0, offset, None, value))
        asyncio.run(checkpoint())
    written = sum(t.bytes_written for t in tables) - before
    state = store.get("full")
    assert state is not None
    return {
        "pending": len(state.pending_messages),
        "open_turns": len(state.turns),
        "remembered": len(state.seen_messages),
        "input_bytes": sent,
        "changelog_bytes": written,
        "ratio": written / sent,
    }


def bounded() -> dict[str, Any]:
    return {
        "cost_us_per_record": {
            size: dict(zip(("one_session", "small_sessions"), cost(size), strict=True))
            for size in SIZES
        },
        "writes": writes(),
    }


def bounded_report(r: dict[str, Any]) -> str:
    lines = ["pending in the session   µs/record  small sessions  ratio"]
    for size, c in r["cost_us_per_record"].items():
        one, small = c["one_session"], c["small_sessions"]
        lines.append(f"{size:>22,}  {one:>10.1f}  {small:>14.1f}  {one / small:>5.2f}")
    w = r["writes"]
    lines.append(
        f"writes near the limits ({w['pending']} pending, {w['open_turns']} open turns, "
        f"{w['remembered']} identities): {w['changelog_bytes']:,} changelog bytes for "
        f"{w['input_bytes']:,} input bytes = {w['ratio']:.1f}x"
    )
    return "\n".join(lines)

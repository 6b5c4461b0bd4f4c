"""The core by stage, and against a deliberately naive reference core (issue 21 item 4).

``stage_table``: µs per record of each stage of the core on the workload's records, each
stage timed as the difference between two runs over the same records that differ by it:
parsing (``orjson``), validation (the msgspec Structs, and the models for what they do not
take), the rest of decoding (translation, limits, redaction), applying to the session
(assembler, collapse, state), and serializing what a checkpoint writes (each changed
session's new records, once per 1,000 records). Every run lets its records go and freezes
what survives as replay does, so the collector costs each stage what it costs the core.

``reference_rate``: records/s of a core that does the same work the naive way: each record
parsed and validated with the same models, each session a dict of its messages, turns and
decisions, a turn's JSON emitted when an assistant message finishes and again when a
decision joins it, decisions kept by id, and the whole session serialized after every
record (what ``table[key] = value`` writes). Nothing incremental, and none of the care: no
limits, no redaction, no collapse of equivalent decisions, no dead letters.

``floor_rate``: records/s of the core's own parts with none of its bookkeeping: each
record parsed, taken by the same Structs, translated and redacted as the core does, and
each turn's JSON written when its call finishes and again when a decision joins it
(through the call's id or a tool call's), decisions kept by id; no limits, identities,
applied offsets, entries, collapse, expiry, counts or dead letters. It writes a few more
revisions than replay does (a redelivered copy under a new id is one more to it).
What the core costs above it is what its care costs (SPEC §4-§6), the part a faster
design would have to shrink.

``least_rate``: records/s of the floor plus the least bookkeeping SPEC §2-§6 asks for, as
tight as plain Python writes it: the checks the Structs leave to Python, the applied
offset, message identities (pending, replaced in place, remembered up to the limit), the
collapse by natural key with the Codex sibling, unique-or-drop joins, waiting decisions,
decisions in their order, expiry, every per-session limit and the counts. All in memory,
nothing laid out for a changelog, its dead letters counted and not written: a lower bound
on what a core that keeps the contract costs here. It writes replay's TURNS lines byte for
byte over the workload (``tests/test_bench_stages.py``).
"""

from __future__ import annotations

import contextlib
import gc
import io
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from functools import partial
from typing import Any

import msgspec
import orjson

from stream_app import heap
from stream_app.config import Settings
from stream_app.core import jsonbytes, wire
from stream_app.core.completion import render_completion
from stream_app.core.counts import Count
from stream_app.core.intake import decision_rules, message_rules
from stream_app.core.policy import Policy
from stream_app.core.records import SourceRecord, turn_key, turns_line
from stream_app.core.redaction import redact
from stream_app.core.session import SessionState
from stream_app.core.tenant import normalize_org
from stream_app.core.translate import identity, inference_message
from stream_app.models.dead_letter import Reason
from stream_app.models.decision import DecisionDict, DecisionPayload
from stream_app.models.message import LLMMessagePublishedEvent, role_of
from stream_app.models.timestamps import format_utc, instant_ns
from stream_app.pipeline import Pipeline
from stream_app.replay import FREEZE_EVERY, record_value
from stream_app.state import entries
from stream_app.state.memory import MemorySessions

CHECKPOINT_RECORDS = 1_000  # records between two serializations of the changed sessions


def source_records(lines: list[dict[str, Any]]) -> list[SourceRecord]:
    return [
        SourceRecord(
            line["topic"],
            line["topic"],
            0,
            offset,
            None if line["key"] is None else line["key"].encode(),
            record_value(line["value"]),
        )
        for offset, line in enumerate(lines)
    ]


def cpu_seconds(run: Callable[[], object]) -> float:
    """CPU seconds of ``run`` (the process's: other processes' turns on the cores do not
    count)."""
    gc.collect()
    started = time.process_time()
    run()
    return time.process_time() - started


def _parse(records: list[SourceRecord]) -> None:
    for record in records:
        with contextlib.suppress(orjson.JSONDecodeError):  # the workload's malformed records
            orjson.loads(record.value or b"")


def _validate(records: list[SourceRecord]) -> None:
    """As intake checks a document: its Struct (``core/wire.py``), and the models for what
    the Struct does not take."""
    for record in records:
        try:
            doc = orjson.loads(record.value or b"")
            kind = record.kind == "messages"
            try:
                msgspec.convert(doc, wire.EventStruct if kind else wire.DecisionStruct)
            except msgspec.ValidationError:
                (LLMMessagePublishedEvent if kind else DecisionPayload).model_validate(doc)
        except ValueError:  # orjson's and pydantic's errors both are
            pass


def _decode(pipeline: Pipeline, records: list[SourceRecord]) -> None:
    """Each record decoded and let go, as the core lets it go once applied: a list of them
    all kept the collector walking 60,000 decoded records (10 µs a record, charged to
    decoding, that neither replay nor the worker pays)."""
    for record in records:
        pipeline.decode(record)


class _Journaled(MemorySessions):
    """Sessions in a dict that keep what changed for the next seal, as ``TableSessions``
    does (``MemorySessions`` drops it: nothing of it is written)."""

    def put(self, state: SessionState) -> None:
        self._sessions[state.session_id] = state


def _core(records: list[SourceRecord], serialize: bool) -> None:
    store = _Journaled() if serialize else MemorySessions()
    pipeline = Pipeline(Settings().policy(), store, clock=lambda: 0.0)
    changed: set[str] = set()
    for n, record in enumerate(records, 1):
        if n % FREEZE_EVERY == 0:
            heap.freeze_survivors()  # as replay and the worker keep the state from the collector
        item, _ = pipeline.decode(record)
        if item is None:
            continue
        pipeline.apply(item)
        if serialize:
            changed.add(item.session_id)
            if n % CHECKPOINT_RECORDS == 0:
                _seal(pipeline, changed)
    if serialize:
        _seal(pipeline, changed)


def _seal(pipeline: Pipeline, changed: set[str]) -> None:
    """What a checkpoint serializes of each changed session: its new entries, new turns'
    bodies and head (``TableSessions.seal`` and ``write``, without the tables)."""
    for session_id in changed:
        state = pipeline.store.get(session_id)
        if state is None:
            continue
        change = entries.changes(state, 0, (), partial(turn_key, session_id))
        for value in [*change["before"].values(), *change["bodies"].values()]:
            if callable(value):
                value()
        entries.head(state, 0, change["dropped"])
    changed.clear()


def stage_table(lines: list[dict[str, Any]], rounds: int = 5) -> list[tuple[str, float]]:
    """(stage, µs per record), the best of ``rounds`` for each run, the runs taken in turn
    round after round (on a shared machine a run's noise would otherwise fall on one stage,
    and a stage's difference come out below zero)."""
    records = source_records(lines)
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


def reference(payload: list[bytes]) -> int:
    """The naive core over replay's input lines; the number of turn revisions emitted."""
    sessions: dict[str, dict[str, Any]] = {}
    emitted = 0
    for line in payload:
        doc = orjson.loads(line)
        value = doc["value"]
        try:
            if doc["topic"] == "messages":
                LLMMessagePublishedEvent.model_validate(value)
            else:
                DecisionPayload.model_validate(value)
        except ValueError:
            continue
        if doc["topic"] == "messages":
            sid = value.get("conversationId")
            message = value.get("message")
            if not isinstance(sid, str) or not isinstance(message, dict):
                continue
            session = sessions.setdefault(sid, {"pending": [], "turns": {}, "decisions": {}})
            session["pending"].append(message)
            if message.get("role") in ("ROLE_ASSISTANT", 2) and message.get("finishReason"):
                call = message.get("messageId")
                turn = {
                    "session_id": sid,
                    "inference_call_id": call,
                    "new_messages": session["pending"],
                    "decisions": [
                        d for d in session["decisions"].values() if d.get("call_id") == call
                    ],
                }
                session["turns"][call] = turn
                session["pending"] = []
                orjson.dumps(turn)
                emitted += 1
        else:
            sid, decision_id = value.get("session_id"), value.get("decision_id")
            if not isinstance(sid, str) or decision_id is None:
                continue
            session = sessions.setdefault(sid, {"pending": [], "turns": {}, "decisions": {}})
            if decision_id in session["decisions"]:
                continue  # a redelivery
            session["decisions"][decision_id] = value
            turn = session["turns"].get(value.get("call_id"))
            if turn is not None:
                turn["decisions"].append(value)
                orjson.dumps(turn)
                emitted += 1
        orjson.dumps(session)
    return emitted


def _best_rate(core: Callable[[list[bytes]], int], lines: list[dict[str, Any]]) -> float:
    """Records/s of ``core`` over replay's input lines: CPU time, the best of three, as
    ``bench.core_rate`` times replay."""
    payload = [orjson.dumps(line) for line in lines]
    return len(payload) / min(cpu_seconds(lambda: core(payload)) for _ in range(3))


def reference_rate(lines: list[dict[str, Any]]) -> float:
    return _best_rate(reference, lines)


class _FloorSession:
    __slots__ = ("decisions", "pending", "turns")

    def __init__(self) -> None:
        self.pending: list[bytes] = []  # each message's JSON, as intake makes it once
        self.turns: dict[str | None, dict[str, Any]] = {}
        self.decisions: set[str] = set()


def floor(payload: list[bytes]) -> int:
    """The core's parts without its bookkeeping over replay's input lines; the number of
    turn revisions emitted (each also written as replay writes a line)."""
    sessions: defaultdict[str, _FloorSession] = defaultdict(_FloorSession)
    counts: Counter[Count] = Counter()
    out = io.BytesIO()
    emitted = 0
    for line in payload:
        doc = orjson.loads(line)
        value = doc["value"]
        if isinstance(value, str):
            try:
                value = orjson.loads(value)
            except orjson.JSONDecodeError:
                continue
        turn: dict[str, Any] | None
        if doc["topic"] == "messages":
            try:
                event = msgspec.convert(value, wire.EventStruct)
            except msgspec.ValidationError:
                continue
            message, sid = event.message, event.conversationId
            role = role_of(message.role)
            if role is None:
                continue
            translated = inference_message(message, role, counts)
            session = sessions[sid]
            session.pending.append(orjson.dumps(translated))
            if role != "assistant" or not message.finishReason:
                continue
            tool_calls = [p for p in translated["parts"] if p["type"] == "tool_call"]
            turn = {
                "new_messages": orjson.Fragment(b"[" + b",".join(session.pending) + b"]"),
                "completion": render_completion(translated),
                "decisions": [],
                "inference_call_id": message.messageId,
                "tool_calls": tool_calls,
            }
            session.pending = []
            for reach in [message.messageId, *(str(call["id"]) for call in tool_calls)]:
                session.turns[reach] = turn  # a decision names the call or a tool call
        else:
            try:
                decision = msgspec.convert(value, wire.DecisionStruct)
            except msgspec.ValidationError:
                continue
            sid = decision.session_id
            session = sessions[sid]
            if decision.decision_id in session.decisions:
                continue  # a redelivery
            session.decisions.add(decision.decision_id)
            stored = {**value, "raw": redact(value["raw"])}  # as intake redacts every one
            turn = session.turns.get(decision.call_id)
            if turn is None:
                continue
            turn["decisions"].append(stored)
        out.write(turns_line(sid, orjson.dumps(turn)))
        emitted += 1
    return emitted


def floor_rate(lines: list[dict[str, Any]]) -> float:
    return _best_rate(floor, lines)


Entry = tuple[tuple[int, str], DecisionDict]  # a joined decision: its order, the decision


class _LeastTurn:
    __slots__ = ("body", "decisions", "emitted_at", "reach", "revision", "size")

    def __init__(self, body: dict[str, Any], reach: list[str], now: float) -> None:
        self.body = body
        self.reach = reach
        self.emitted_at = now
        self.decisions: list[Entry] = []
        self.revision = 1
        self.size = 0


class _LeastSession:
    __slots__ = (
        "applied",
        "collapse",
        "last_seen",
        "open_bytes",
        "pending",
        "pending_at",
        "pending_bytes",
        "reach",
        "seen",
        "turns",
        "unsequenced",
        "waiting",
    )

    def __init__(self) -> None:
        self.applied = -1
        self.last_seen = 0.0
        self.pending: list[tuple[str | None, int, bytes]] = []  # identity, sequence, JSON
        self.pending_at: dict[str, int] = {}  # identity -> its index in ``pending``
        self.pending_bytes = 0
        self.unsequenced = False
        self.seen: dict[str, None] = {}  # remembered identities, oldest first
        self.reach: dict[str, list[_LeastTurn]] = {}  # call or tool-call id -> turns
        self.turns: dict[str, _LeastTurn] = {}  # open turns, oldest first
        self.open_bytes = 0
        self.waiting: dict[str, list[Entry]] = {}
        self.collapse: set[tuple[object, ...]] = set()

    def close(self, turn: _LeastTurn) -> None:
        del self.turns[turn.body["inference_call_id"]]
        self.open_bytes -= turn.size
        for rid in turn.reach:
            self.reach[rid].remove(turn)


def _entry_order(entry: Entry) -> tuple[int, str]:
    return entry[0]


def _pending_order(pending: tuple[str | None, int, bytes]) -> int:
    return pending[1]


def least(payload: list[bytes], now: float = 0.0, policy: Policy | None = None) -> list[bytes]:
    """The least core over replay's input lines; its TURNS lines (the module's docstring)."""
    core = _LeastCore(now, policy or Settings().policy())
    made = (core.line(line, offset) for offset, line in enumerate(payload))
    return [turn for turn in made if turn is not None]


class _LeastCore:
    """The least core's sessions, clock and counts; ``line`` takes one input line."""

    def __init__(self, now: float, policy: Policy) -> None:
        self.now = now
        self.policy = policy
        self.sessions: dict[str, _LeastSession] = {}
        self.counts: Counter[Count] = Counter()

    def line(self, line: bytes, offset: int) -> bytes | None:
        """The TURNS line the input line makes, if it makes one."""
        p, counts = self.policy, self.counts
        doc = orjson.loads(line)
        value, key = doc["value"], doc["key"]
        if key is not None and len(key.encode()) > p.max_key_bytes:
            counts[Count.dead_letter(Reason.SESSION_LIMIT)] += 1
            return None
        if isinstance(value, str):
            try:
                value = orjson.loads(value)
            except orjson.JSONDecodeError:
                counts[Count.dead_letter(Reason.INVALID_JSON)] += 1
                return None
        try:
            if doc["topic"] == "messages":
                turn = self.message(msgspec.convert(value, wire.EventStruct), offset)
            else:
                turn = self.decision(msgspec.convert(value, wire.DecisionStruct), value, offset)
        except msgspec.ValidationError:
            counts[Count.dead_letter(Reason.SCHEMA)] += 1
            return None
        if turn is None:
            return None
        body = jsonbytes.dumps(
            {
                "new_messages": turn.body["new_messages"],
                "completion": turn.body["completion"],
                "decisions": [d for _, d in sorted(turn.decisions, key=_entry_order)],
                "inference_call_id": turn.body["inference_call_id"],
                "tool_calls": turn.body["tool_calls"],
            }
        )
        if len(body) > p.max_turn_bytes:
            counts[Count.dead_letter(Reason.TURN_TOO_LARGE)] += 1
            return None
        sid = turn.body["session_id"]
        if turn.revision == 1:
            session = self.sessions[sid]
            while session.turns and (
                len(session.turns) >= p.max_open_turns
                or session.open_bytes + len(body) > p.max_open_turn_bytes
            ):
                session.close(next(iter(session.turns.values())))
                counts[Count.TURNS_CLOSED_EARLY] += 1
            turn.size = len(body)
            session.turns[turn.body["inference_call_id"]] = turn
            session.open_bytes += turn.size
        counts[Count.TURNS_EMITTED if turn.revision == 1 else Count.TURN_REVISIONS] += 1
        return turns_line(turn_key(sid, turn.body["inference_call_id"]).decode(), body)

    def session(self, sid: str, offset: int) -> _LeastSession | None:
        """The record's session, after expiry (an idle session, turns past their window);
        None for a record applied already."""
        p, counts, now, sessions = self.policy, self.counts, self.now, self.sessions
        session = sessions.get(sid)
        if session is None or (
            session.last_seen and now - session.last_seen > p.session_ttl_seconds
        ):
            if session is not None:
                orphaned = sum(len(waiting) for waiting in session.waiting.values())
                counts[Count.dead_letter(Reason.ORPHANED_DECISION)] += orphaned
            session = sessions[sid] = _LeastSession()
        while session.turns and (
            now > next(iter(session.turns.values())).emitted_at + p.late_decision_window_seconds
        ):
            session.close(next(iter(session.turns.values())))
            counts[Count.TURNS_CLOSED] += 1
        if offset <= session.applied:
            counts[Count.REPROCESSED] += 1
            return None
        session.applied, session.last_seen = offset, now
        return session

    def message(self, event: wire.EventStruct, offset: int) -> _LeastTurn | None:
        """The turn the message completes, if it completes one."""
        p, counts, now = self.policy, self.counts, self.now
        message, sid = event.message, event.conversationId
        checked = message_rules(event)  # SPEC §2's rules the Struct leaves to Python
        if checked is None:
            counts[Count.dead_letter(Reason.SCHEMA)] += 1
            return None
        if event.orgId is not None and normalize_org(event.orgId) != p.org_id:
            counts[Count.dead_letter(Reason.TENANT_MISMATCH)] += 1
            return None
        role, sequence = checked
        translated = inference_message(message, role, counts)
        json = jsonbytes.dumps(translated)
        if len(json) > p.max_record_bytes:
            counts[Count.dead_letter(Reason.TOO_LARGE)] += 1
            return None
        session = self.session(sid, offset)
        if session is None:
            return None
        ident = identity(message.messageId, sequence)
        call = message.messageId if role == "assistant" and message.finishReason else None
        if (ident is not None and ident in session.seen) or (
            call is not None and ("call:" + call in session.seen or call in session.turns)
        ):
            counts[Count.DUPLICATE_MESSAGE] += 1
            return None
        at = None if ident is None else session.pending_at.get(ident)
        held = session.pending_bytes - (0 if at is None else len(session.pending[at][2]))
        if call is None and (
            (at is None and len(session.pending) >= p.max_pending_messages)
            or held + len(json) > p.max_pending_bytes
        ):
            counts[Count.dead_letter(Reason.SESSION_LIMIT)] += 1
            return None
        entry = (ident, 0 if sequence is None else sequence, json)
        if at is not None:
            session.pending[at] = entry
        else:
            if ident is not None:
                session.pending_at[ident] = len(session.pending)
            session.pending.append(entry)
        session.pending_bytes = held + len(json)
        session.unsequenced |= sequence is None
        if call is None:
            return None
        pending = session.pending
        if not session.unsequenced:
            pending.sort(key=_pending_order)
        tool_calls = [part for part in translated["parts"] if part["type"] == "tool_call"]
        reach = list(dict.fromkeys([call, *(str(part["id"]) for part in tool_calls)]))
        body = {
            "session_id": sid,
            "new_messages": orjson.Fragment(b"[" + b",".join([m[2] for m in pending]) + b"]"),
            "completion": render_completion(translated),
            "inference_call_id": call,
            "tool_calls": tool_calls,
        }
        turn = _LeastTurn(body, reach, now)
        seen = session.seen
        for ident, _, _ in pending:
            if ident is not None:
                seen[ident] = None
        seen["call:" + call] = None
        while len(seen) > p.max_remembered_identities:
            del seen[next(iter(seen))]
        session.pending, session.pending_at = [], {}
        session.pending_bytes, session.unsequenced = 0, False
        for rid in reach:
            reaching = session.reach.setdefault(rid, [])
            reaching.append(turn)
            for waiting in session.waiting.pop(rid, ()):
                if len(reaching) > 1:
                    counts[Count.dead_letter(Reason.AMBIGUOUS_DECISION)] += 1
                elif len(turn.decisions) >= p.max_turn_decisions:
                    counts[Count.dead_letter(Reason.SESSION_LIMIT)] += 1
                else:
                    turn.decisions.append(waiting)
        return turn

    def decision(
        self, decision: wire.DecisionStruct, value: dict[str, Any], offset: int
    ) -> _LeastTurn | None:
        """The turn the decision revises, if it joins one now."""
        p, counts, now = self.policy, self.counts, self.now
        checked = decision_rules(decision)  # SPEC §3's rules the Struct leaves to Python
        if checked is None:
            counts[Count.dead_letter(Reason.SCHEMA)] += 1
            return None
        if decision.org_id is not None and normalize_org(decision.org_id) != p.org_id:
            counts[Count.dead_letter(Reason.TENANT_MISMATCH)] += 1
            return None
        session = self.session(decision.session_id, offset)
        if session is None:
            return None
        delay, captured = checked[0], decision.captured_at
        occurred = instant_ns(decision.occurred_at)
        call_id, harness = decision.call_id, decision.agent_harness
        # The natural keys of SPEC §3 (org and session: the same for every key of the session).
        acted = (decision.accepted, decision.explicit, decision.interaction_mode, occurred)
        natural: tuple[object, ...]
        if harness == "claude-code" and call_id is not None:
            natural = ("tool-use", *acted, call_id)
        else:
            path, delay_key = decision.file_path, -1 if delay is None else delay
            natural = ("edit", harness, path, *acted, call_id or "", delay_key)
        sibling = ("codex", *acted, call_id) if harness == "codex" and call_id is not None else None
        pathless = decision.file_path == ""
        if natural in session.collapse or (pathless and sibling in session.collapse):
            counts[Count.DUPLICATE_DECISION] += 1
            return None
        reached = [] if call_id is None else session.reach.get(call_id, [])
        if len(reached) == 1 and len(reached[0].decisions) >= p.max_turn_decisions:
            counts[Count.dead_letter(Reason.SESSION_LIMIT)] += 1
            return None
        waiting = None if call_id is None or reached else session.waiting.setdefault(call_id, [])
        if waiting is not None and len(waiting) >= p.max_waiting_decisions:
            counts[Count.dead_letter(Reason.SESSION_LIMIT)] += 1
            return None
        session.collapse.add(natural)
        if sibling is not None and not pathless:
            session.collapse.add(sibling)
        if call_id is None:
            counts[Count.dead_letter(Reason.UNATTRIBUTABLE_DECISION)] += 1
            return None
        stored: DecisionDict = {
            "decision_id": decision.decision_id,
            "org_id": p.org_id,
            "session_id": decision.session_id,
            "user_id": decision.user_id,
            "agent_harness": harness,
            "file_path": decision.file_path,
            "accepted": decision.accepted,
            "explicit": decision.explicit,
            "interaction_mode": decision.interaction_mode,
            "commit_sha": decision.commit_sha,
            "call_id": call_id,
            "edit_retention_score": decision.edit_retention_score,
            "observation_delay_ms": delay,
            "occurred_at": decision.occurred_at,
            "captured_at": captured or format_utc(now),
            "raw": redact(value["raw"]),
        }
        entry = ((occurred, decision.decision_id), stored)
        if waiting is not None:
            waiting.append(entry)
            return None
        if len(reached) > 1:
            counts[Count.dead_letter(Reason.AMBIGUOUS_DECISION)] += 1
            return None
        turn = reached[0]
        turn.decisions.append(entry)
        turn.revision += 1
        return turn


def least_rate(lines: list[dict[str, Any]]) -> float:
    return _best_rate(lambda payload: len(least(payload)), lines)


def report(
    stages: list[tuple[str, float]], core: float, naive: float, bare: float, least: float
) -> str:
    width = max(len(name) for name, _ in stages)
    rows = [f"{name:<{width}}  {us:7.1f} µs/record" for name, us in stages]
    rows.append(
        f"replay {core:,.0f} records/s against the naive reference core's {naive:,.0f}: "
        f"{core / naive:.2f}x (goal 1.5x)"
    )
    rows.append(
        f"the core's parts without its bookkeeping (the floor): {bare:,.0f} records/s, "
        f"{bare / naive:.2f}x the reference; the bookkeeping and checks above it: "
        f"{1e6 / core - 1e6 / bare:.1f} µs/record of replay's {1e6 / core:.1f}"
    )
    rows.append(
        f"the floor with the least bookkeeping the contract asks for, in memory (the least "
        f"core, replay's output byte for byte): {least:,.0f} records/s, {least / naive:.2f}x "
        f"the reference, {1e6 / least - 1e6 / bare:.1f} µs/record above the floor"
    )
    return "\n".join(rows)

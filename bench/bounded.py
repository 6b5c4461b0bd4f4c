"""``python -m bench --bounded``: what a record costs, and writes, against its session's size.

Two measures, in one process and one run, no broker (issue 19 items 3 and 4):

- **cost**: µs per record of the core (decode and apply, as replay drives it) for the same
  records sent to one session already holding 10, 1,000 and 20,000 pending messages, against
  the same records spread over small sessions; printed as the ratio (goal: within 2x);
- **writes**: changelog bytes (keys and values of every table record a checkpoint writes)
  per input byte, for small messages reaching a session near its limits, each record
  followed by a checkpoint (the worst case: a checkpoint writes each changed session once);
  goal: at most 20x.

Run on another checkout (``cd old && python -m bench --bounded``) for an A/B: the core's
API is the same; the writes are measured only where the tables hold entries.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import orjson

from stream_app.core.policy import Policy
from stream_app.core.records import SourceRecord
from stream_app.pipeline import Pipeline
from stream_app.state.memory import MemorySessions

SIZES = (10, 1_000, 20_000)
MEASURED = 2_000  # records timed at each size
ROUNDS = 5  # the best of, per size and layout: the machine is shared


def _policy(**limits: int) -> Policy:
    """A policy with the limits this checkout knows of (an older one has none)."""
    fields = {f.name for f in dataclasses.fields(Policy)}
    known: dict[str, Any] = {k: v for k, v in limits.items() if k in fields}
    return Policy(org_id="default", **known)


def _msg(session: str, i: int, text: str = "run the tests again, please") -> bytes:
    """A user message of about 110 bytes."""
    message = {"role": 1, "messageId": f"m{i}", "content": [{"text": text}]}
    return orjson.dumps({"conversationId": session, "message": message})


def _decision(session: str, i: int) -> bytes:
    return orjson.dumps(
        {
            "decision_id": f"d{i}",
            "org_id": "default",
            "session_id": session,
            "user_id": "dev",
            "agent_harness": "claude-code",
            "file_path": "a.py",
            "accepted": True,
            "explicit": True,
            "interaction_mode": "agent",
            "commit_sha": None,
            "call_id": f"call-{i}",
            "edit_retention_score": None,
            "observation_delay_ms": None,
            "occurred_at": "2026-01-01T10:00:00Z",
            "captured_at": None,
            "raw": {"tool_use_id": f"call-{i}"},
        }
    )


def _measured(session_of: Any) -> list[SourceRecord]:
    """New messages, copies of them (replacing in place), decisions that wait."""
    out = []
    for i in range(MEASURED):
        session = session_of(i)
        if i % 4 == 3:
            out.append(SourceRecord("decisions", "d", 0, i, None, _decision(session, i)))
        else:
            n = 1_000_000 + (i - i % 2 if i % 4 == 1 else i)  # every other: a copy
            out.append(SourceRecord("messages", "m", 0, i, None, _msg(session, n)))
    return out


def cost(size: int) -> tuple[float, float]:
    """µs per record into one session holding ``size`` pending, and over small sessions."""
    policy = _policy(
        max_pending_messages=size + MEASURED,
        max_pending_bytes=1 << 40,
        max_waiting_decisions=MEASURED,
    )
    big = [SourceRecord("messages", "m", 1, i, None, _msg("big", i)) for i in range(size)]
    best = {"one session": float("inf"), "small sessions": float("inf")}
    for _ in range(ROUNDS):
        for layout, session_of in (
            ("one session", lambda i: "big"),
            ("small sessions", lambda i: f"small-{i // 8}"),
        ):
            pipeline = Pipeline(policy, MemorySessions(), clock=lambda: 0.0)
            for record in big:
                pipeline.process(record)
            records = _measured(session_of)
            started = time.perf_counter()
            for record in records:
                pipeline.process(record)
            elapsed = time.perf_counter() - started
            best[layout] = min(best[layout], elapsed / len(records) * 1e6)
    return best["one session"], best["small sessions"]


class _Table:
    """A table as the worker's store uses it, counting the bytes of what is written."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}
        self.bytes_written = 0

    def get(self, key: bytes) -> bytes | None:
        return self.data.get(key)

    def __iter__(self) -> Any:
        return iter(self.data)

    async def put(self, key: bytes, value: bytes | None) -> None:
        self.bytes_written += len(key) + (0 if value is None else len(value))
        if value is None:
            self.data.pop(key, None)
        else:
            self.data[key] = value

    async def written(self) -> None:
        """Every write is acknowledged at once."""

    def partition_for_key(self, key: bytes) -> int:
        return 0

    def keys_from(self, partition: int, prefix: bytes) -> list[bytes]:
        return [k for k in self.data if k.startswith(prefix)]

    def items_from(self, partition: int, prefix: bytes) -> list[tuple[bytes, bytes]]:
        return sorted((k, v) for k, v in self.data.items() if k.startswith(prefix))


def writes() -> dict[str, float] | None:
    """Changelog bytes per input byte for small messages into a session near its limits."""
    from stream_app.state.sessions import TableSessions

    policy = _policy()
    tables = [_Table() for _ in range(4)]
    try:
        limit = policy.max_state_record_bytes
        sessions, decisions, bodies, table = tables
        store = TableSessions(sessions, decisions, bodies, table, limit)
    except (AttributeError, TypeError):
        return None  # a layout without entries: one record per session
    pipeline = Pipeline(policy, store, clock=lambda: 0.0)
    offset = 0
    for i in range(policy.max_open_turns - 10):  # open turns, each with remembered ids
        for value in (_msg("full", offset), _answer("full", i)):
            pipeline.process(SourceRecord("messages", "m", 0, offset, None, value))
            offset += 1
    for _ in range(policy.max_pending_messages - 20):  # and pending messages
        pipeline.process(SourceRecord("messages", "m", 0, offset, None, _msg("full", offset)))
        offset += 1
    asyncio.run(_checkpoint(store))
    before = sum(t.bytes_written for t in tables)
    sent = 0
    for _ in range(10):
        value = _msg("full", offset)
        sent += len(value)
        pipeline.process(SourceRecord("messages", "m", 0, offset, None, value))
        offset += 1
        asyncio.run(_checkpoint(store))
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


def _answer(session: str, i: int) -> bytes:
    return orjson.dumps(
        {
            "conversationId": session,
            "message": {
                "role": 2,
                "messageId": f"a{i}",
                "finishReason": "stop",
                "content": [{"text": "done"}],
            },
        }
    )


async def _checkpoint(store: Any) -> None:
    snapshot = store.seal()
    await store.write(snapshot)
    store.settled(snapshot)


def measure() -> dict[str, Any]:
    return {
        "cost_us_per_record": {
            size: dict(zip(("one_session", "small_sessions"), cost(size), strict=True))
            for size in SIZES
        },
        "writes": writes(),
    }


def report(r: dict[str, Any]) -> str:
    lines = ["pending in the session   µs/record  small sessions  ratio (goal <= 2)"]
    for size, c in r["cost_us_per_record"].items():
        ratio = c["one_session"] / c["small_sessions"]
        lines.append(
            f"{size:>22,}  {c['one_session']:>10.1f}  {c['small_sessions']:>14.1f}  {ratio:>5.2f}"
        )
    w = r["writes"]
    if w is None:
        lines.append("writes: not measured (this checkout writes a session as one record)")
    else:
        lines.append(
            f"writes near the limits ({w['pending']} pending, {w['open_turns']} open turns, "
            f"{w['remembered']} identities): {w['changelog_bytes']:,} changelog bytes for "
            f"{w['input_bytes']:,} input bytes = {w['ratio']:.1f}x (goal <= 20)"
        )
    return "\n".join(lines)

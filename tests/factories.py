"""Builders of input records, and a harness that drives the real pipeline with a test clock."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson

from bench.workload import decision as workload_decision
from stream_app.core.policy import Policy
from stream_app.core.records import Outputs, SourceRecord
from stream_app.state.memory import MemorySessions
from stream_app.worker.pipeline import Pipeline
from tests.contracts import assert_valid_turn, assert_valid_turn_key

ORG = "acme"


def message(
    session: str = "s1",
    role: Any = "ROLE_USER",
    text: str | None = "hello",
    *,
    message_id: str | None = None,
    sequence: Any = None,
    finish: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    content: list[dict[str, Any]] | None = None,
    **event: Any,
) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": role}
    if content is not None:
        msg["content"] = content
    elif text is not None:
        msg["content"] = [{"text": text}]
    if tool_calls is not None:
        msg["toolCalls"] = tool_calls
    if message_id is not None:
        msg["messageId"] = message_id
    if sequence is not None:
        msg["sequence"] = sequence
    if finish is not None:
        msg["finishReason"] = finish
    return {"conversationId": session, "message": msg, **event}


def assistant(
    session: str = "s1", text: str = "done", *, message_id: str, finish: str = "stop", **kwargs: Any
) -> dict[str, Any]:
    return message(session, "ROLE_ASSISTANT", text, message_id=message_id, finish=finish, **kwargs)


def tool_call(call_id: str, name: str = "edit_file", arguments: Any = None) -> dict[str, Any]:
    return {
        "id": call_id,
        "name": name,
        "arguments": arguments if arguments is not None else '{"path": "a.py"}',
    }


def decision(
    session: str = "s1",
    call_id: str | None = "c1",
    *,
    decision_id: str = "d1",
    occurred_at: str = "2026-01-01T10:00:00Z",
    harness: str = "claude-code",
    file_path: str = "src/a.py",
    **fields: Any,
) -> dict[str, Any]:
    """A decision of ``ORG``: the workload's (``bench/workload.py``), with these defaults;
    ``fields`` override any field."""
    defaults = {
        "org_id": ORG,
        "agent_harness": harness,
        "file_path": file_path,
        "captured_at": "2026-01-01T10:00:01Z",
        "raw": {},
    }
    return workload_decision(session, decision_id, call_id, occurred_at, **{**defaults, **fields})


@dataclass
class Run:
    """The replay pipeline over records fed one by one, with a clock the test moves."""

    policy: Policy = field(default_factory=lambda: Policy(org_id=ORG))
    now: float = 1_767_261_600.0  # 2026-01-01T10:00:00Z
    offset: int = 0
    outputs: list[Outputs] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.pipeline = Pipeline(self.policy, MemorySessions(), clock=lambda: self.now)

    def feed(self, kind: str, value: Any, key: bytes | None = None) -> Outputs:
        raw = value if isinstance(value, bytes) else orjson.dumps(value)
        topic = "llm.messages" if kind == "messages" else "developer.decisions"
        record = SourceRecord(kind, topic, 0, self.offset, key, raw)  # type: ignore[arg-type]
        self.offset += 1
        out = self.pipeline.process(record)
        for revision in out.turns:
            assert_valid_turn(revision.turn)
            assert_valid_turn_key(revision.key_bytes, revision.turn, revision.session_id)
        self.outputs.append(out)
        return out

    def msg(self, value: Any, key: bytes | None = None) -> Outputs:
        return self.feed("messages", value, key)

    def dec(self, value: Any, key: bytes | None = None) -> Outputs:
        return self.feed("decisions", value, key)

    def tick(self) -> Outputs:
        """The worker's one timer, at ``now``: every session whose next instant has come."""
        out = self.pipeline.tick()
        self.outputs.append(out)
        return out

    @property
    def revisions(self) -> list[dict[str, Any]]:
        return [r.turn for out in self.outputs for r in out.turns]

    @property
    def dead_letters(self) -> list[dict[str, Any]]:
        return [d for out in self.outputs for d in out.dead_letters]

    @property
    def counts(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for out in self.outputs:
            total.update(out.counts)
        return total

    def final(self) -> dict[str, dict[str, Any]]:
        """The latest revision of every turn key: what a compacted turn topic holds."""
        return {t["inference_call_id"]: t for t in self.revisions}

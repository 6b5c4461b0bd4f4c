"""A realistic workload in replay format: coding-agent sessions with tool loops.

Sessions of inference calls (a prompt, the assistant's reasoning, text and tool call, the
tool's result, ... a final answer), some streamed first; edits accepted by a decision, most
after their turn, and later retention observations; a few percent of records redelivered,
a few malformed; sessions interleaved at random. Deterministic per seed.

With ``verdicts`` (``--verdicts``), the edits get the developers' mix of verdicts (explicit
and implicit accepts and rejects, a few conflicting) and a rejected edit is often retried: a
session forked from the same messages whose new answer is accepted (or, now and then, is the
same answer again), the prompts that preference data pairs. Without it the output is the
same bytes as before the option existed.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from stream_app.core.records import TopicKind
from stream_app.ingest.lines import record_value

Line = dict[str, Any]
_WORDS = (
    "the pagination helper slices one item too far so the next page repeats the last row we "
    "should compute the start index from the page number and keep the end exclusive"
)
LOREM = _WORDS.split()


def decision(session: str, decision_id: str, call_id: str | None, when: str, **fields: Any) -> Line:
    """A claude-code decision accepting the edit of tool call ``call_id``."""
    return {
        "decision_id": decision_id,
        "session_id": session,
        "user_id": "dev-1",
        "agent_harness": "claude-code",
        "file_path": "src/paginate.py",
        "accepted": True,
        "explicit": True,
        "interaction_mode": "agent",
        "commit_sha": None,
        "call_id": call_id,
        "edit_retention_score": None,
        "observation_delay_ms": None,
        "occurred_at": when,
        "captured_at": "2026-11-29T10:00:00Z",
        "raw": {"hook": "PostToolUse", "tool_use_id": call_id, "cwd": "/home/dev/shop"},
        **fields,
    }


def chat(session: str, message_id: str, role: int, text: str, **fields: Any) -> bytes:
    """A small message event: no event id, sequence or time (``role`` 1 user, 2 assistant)."""
    message = {"role": role, "messageId": message_id, "content": [{"text": text}], **fields}
    return orjson.dumps({"conversationId": session, "message": message})


def _prose(rnd: random.Random, words: int) -> str:
    return " ".join(rnd.choice(LOREM) for _ in range(words))


# Verdicts of an edit (--verdicts): (probability, accepted, explicit, conflicting).
VERDICTS = (
    (0.50, True, True, False),
    (0.25, False, True, False),
    (0.12, True, False, False),
    (0.08, False, False, False),
    (0.05, True, True, True),  # an accept and a reject of one edit: conflicting
)
RETRY = 0.7  # a rejected edit retried in a fork of its session
SAME_AGAIN = 0.15  # ... whose answer is the rejected one again


class _Session:
    def __init__(self, sid: str, rnd: random.Random, verdicts: random.Random | None = None) -> None:
        self.sid, self.rnd = sid, rnd
        self.seq = 0
        self.calls = rnd.randint(2, 8)
        self.backlog: list[Line] = []  # records to publish, in order
        self.late: list[tuple[int, Line]] = []  # (not before this tick, record)
        self.verdicts = verdicts  # None: every edit accepted, as before --verdicts
        self.said: list[Line] = []  # (with verdicts) the messages published, final copies
        self.forks: list[_Session] = []  # (with verdicts) retries of rejected edits
        self.forked = False  # a retry's fork: over once its backlog is published

    def _message(self, role: str, **fields: Any) -> Line:
        self.seq += 1
        message = {
            "role": role,
            "messageId": f"{self.sid}-m{self.seq}",
            "sequence": str(self.seq),
            **fields,
        }
        return {
            "topic": "messages",
            "key": self.sid,
            "value": {
                "eventId": f"evt-{self.sid}-{self.seq}",
                "conversationId": self.sid,
                "publishedAt": "2026-11-29T10:00:00Z",
                "message": message,
            },
        }

    def _decision(self, call_id: str, n: int, **fields: Any) -> Line:
        when = f"2026-11-29T10:{n % 60:02d}:{self.seq % 60:02d}Z"
        value = decision(self.sid, f"{self.sid}-d{n}", call_id, when, **fields)
        return {"topic": "decisions", "key": self.sid, "value": value}

    def plan_call(self, tick: int) -> None:
        """Queue the records of the next inference call (and schedule its late decisions)."""
        rnd = self.rnd
        self.calls -= 1
        if self.seq == 0 or rnd.random() < 0.3:
            self.backlog.append(self._message("ROLE_USER", content=[{"text": _prose(rnd, 40)}]))
            self.said.append(self.backlog[-1])
        final = self.calls == 0
        content = [{"reasoning": _prose(rnd, 30)}, {"text": _prose(rnd, 50)}]
        tool_id = f"toolu_{self.sid}_{self.seq + 1}"
        edit = not final and rnd.random() < 0.5
        fields: dict[str, Any] = {
            "content": content,
            "finishReason": "stop" if final else "tool_calls",
        }
        if not final:
            args = (
                {"path": "src/paginate.py", "old": _prose(rnd, 12), "new": _prose(rnd, 12)}
                if edit
                else {"path": "src/paginate.py"}
            )
            fields["toolCalls"] = [
                {
                    "id": tool_id,
                    "name": "edit_file" if edit else "read_file",
                    "arguments": orjson.dumps(args).decode(),
                }
            ]
        if rnd.random() < 0.2:  # streamed: a partial copy first, then the final one
            streamed = self._message("ROLE_ASSISTANT", content=content[:1])
            self.seq -= 1
            self.backlog.append(streamed)
        prompt = list(self.said) if self.verdicts is not None else []
        assistant = self._message("ROLE_ASSISTANT", **fields)
        call_id = assistant["value"]["message"]["messageId"]
        decision = self._decision(tool_id, self.seq) if edit else None
        if decision is not None and self.verdicts is not None:
            decision = self._judged(decision, tick, prompt, fields)
        if decision is not None and rnd.random() < 0.25:
            self.backlog.append(decision)  # the accept overtakes its turn
            decision = None
        self.backlog.append(assistant)
        if decision is not None:
            self.late.append((tick + rnd.randint(1, 200), decision))
        if self.verdicts is not None:
            self.said.append(assistant)
        if not final:
            result = {"toolResult": {"toolCallId": tool_id, "result": {"content": _prose(rnd, 30)}}}
            self.backlog.append(self._message("ROLE_TOOL", content=[result]))
            self.said.append(self.backlog[-1])
        elif rnd.random() < 0.5:
            retention = self._decision(
                call_id,
                self.seq + 1000,
                agent_harness="pi",
                explicit=False,
                edit_retention_score=0.8,
                observation_delay_ms=600000,
            )
            self.late.append((tick + rnd.randint(1, 400), retention))

    def _judged(
        self, decision: Line, tick: int, prompt: list[Line], fields: dict[str, Any]
    ) -> Line:
        """(--verdicts) The edit's verdict drawn from :data:`VERDICTS`; a reject is often
        retried in a fork of the session. Returns the decision to publish."""
        vr = self.verdicts
        assert vr is not None
        roll, at, drawn = vr.random(), 0.0, VERDICTS[-1]
        for entry in VERDICTS:
            at += entry[0]
            if roll < at:
                drawn = entry
                break
        _, accepted, explicit, conflicting = drawn
        value = dict(decision["value"], accepted=accepted, explicit=explicit)
        if not explicit:
            value["raw"] = {"source": "config"}
        if conflicting:
            other = dict(value, decision_id=value["decision_id"] + "-x", accepted=False)
            self.late.append((tick + vr.randint(1, 50), {**decision, "value": other}))
        if not accepted and explicit and vr.random() < RETRY:
            self.forks.append(self._retry(prompt, fields, vr))
        return {**decision, "value": value}

    def _retry(self, prompt: list[Line], fields: dict[str, Any], vr: random.Random) -> _Session:
        """A fork of this session: its messages up to the rejected answer, published again
        under another conversation, then another answer (now and then the same), accepted."""
        fork = _Session(f"{self.sid}-retry{self.seq}", self.rnd, vr)
        fork.calls, fork.forked = 0, True
        for line in prompt:
            value = line["value"]
            message = dict(
                value["message"], messageId=f"{fork.sid}-{value['message']['messageId']}"
            )
            fork.seq = int(message["sequence"])
            fork.backlog.append(
                {
                    **line,
                    "key": fork.sid,
                    "value": {
                        **value,
                        "eventId": f"evt-{fork.sid}-{fork.seq}",
                        "conversationId": fork.sid,
                        "message": message,
                    },
                }
            )
        tool_id = f"toolu_{fork.sid}_{fork.seq + 1}"
        answer = dict(fields)
        if vr.random() >= SAME_AGAIN:
            args = {"path": "src/paginate.py", "old": _prose(vr, 12), "new": _prose(vr, 12)}
            answer["content"] = [{"text": _prose(vr, 50)}]
        else:
            args = orjson.loads(fields["toolCalls"][0]["arguments"])
        answer["toolCalls"] = [
            {"id": tool_id, "name": "edit_file", "arguments": orjson.dumps(args).decode()}
        ]
        fork.backlog.append(fork._message("ROLE_ASSISTANT", **answer))
        fork.backlog.append(fork._decision(tool_id, fork.seq))
        return fork


def generate(records: int, sessions: int, seed: int = 7, verdicts: bool = False) -> Iterator[Line]:
    """Exactly ``records`` replay lines over about ``sessions`` sessions; with ``verdicts``,
    edits accepted and rejected (:data:`VERDICTS`) and rejects retried."""
    rnd = random.Random(seed)
    judge = random.Random(seed + 1_000_003) if verdicts else None
    active = [_Session(f"sess-{i:05d}", rnd, judge) for i in range(sessions)]
    sent: list[Line] = []
    tick = 0
    while tick < records:
        session = rnd.choice(active)
        due = [entry for entry in session.late if entry[0] <= tick]
        roll = rnd.random()
        if roll < 0.03 and sent:  # a redelivery of something already published
            line = rnd.choice(sent)
            if line["topic"] == "decisions":
                value = dict(
                    line["value"],
                    decision_id=line["value"]["decision_id"] + "-r",
                    captured_at="2026-11-29T11:00:00Z",
                )
                line = {**line, "value": value}
        elif roll < 0.032:
            line = {"topic": "messages", "key": session.sid, "value": '{"conversationId": "'}
        elif due:
            session.late.remove(due[0])
            line = due[0][1]
        else:
            if not session.backlog and session.forked:  # a retry's fork is over: it goes
                active.remove(session)
                continue
            if not session.backlog:
                if session.calls == 0:  # the session is over: a new one takes its place
                    session = _Session(f"{session.sid}-{tick}", rnd, judge)
                    active[rnd.randrange(len(active))] = session
                session.plan_call(tick)
                active.extend(session.forks)
                session.forks.clear()
            line = session.backlog.pop(0)
            sent.append(line)
        tick += 1
        yield line


def encoded(lines: Iterable[Line]) -> list[tuple[TopicKind, bytes | None, bytes]]:
    """Replay lines as the records a producer sends: (kind, key, value)."""
    return [
        (line["topic"], line["key"] and line["key"].encode(), record_value(line["value"]))
        for line in lines
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in (("--records", 100_000), ("--sessions", 1_000), ("--seed", 7)):
        parser.add_argument(name, type=int, default=default)
    parser.add_argument("--out", default="-")
    parser.add_argument(
        "--verdicts",
        action="store_true",
        help="edits accepted and rejected, explicitly and implicitly; rejects retried",
    )
    args = parser.parse_args()
    out = sys.stdout.buffer if args.out == "-" else open(args.out, "wb")  # noqa: SIM115
    with out:
        for line in generate(args.records, args.sessions, args.seed, args.verdicts):
            out.write(orjson.dumps(line) + b"\n")


if __name__ == "__main__":
    main()

"""Hostile input records for the standing guard (issue 10, ``tests/test_hostile.py``).

``hostile_records`` builds every kind of bad record a producer could send, each labelled
with its category and the fate SPEC §6 gives it: a dead-letter reason, or ``contributed``
for the records that are valid however strange (session ids holding NUL, quotes,
backslashes and any Unicode; decisions whose ``call_id`` names nothing, which wait in their
session's state). The limits are those of ``stream_app/core/limits.py``.

Hostile records use session ids of their own, except the ``targeted`` ones: records aimed at
a valid session (its id, its key, its tool-call and inference-call ids) that are rejected
before they reach state (invalid JSON, tombstones, too large, schema, limits, tenant), so
that a valid session's turns show whether any of them got through.

Everything is deterministic per seed. A record is raw bytes (``None`` for a tombstone), as
the broker carries it, since a replay line cannot hold a tombstone or non-UTF-8 bytes.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson
from confluent_kafka import Producer

from stream_app.core.dead_letter import DEAD_LETTER_KEY_MAX_BYTES, DEAD_LETTER_MAX_BYTES
from stream_app.core.limits import MAX_DEPTH, MAX_ID_CHARS
from stream_app.ingest.lines import record_value
from tests.factories import assistant, decision, message, tool_call

Kind = Literal["messages", "decisions"]
CONTRIBUTED = "contributed"

# Records per category (several hundred to a few thousand each; 20,400 in all).
COUNTS = {
    "invalid_json": 2500,
    "non_utf8": 1500,
    "tombstone": 1000,
    "too_large": 300,
    "escapes": 800,
    "schema": 4000,
    "instants": 1000,
    "deep": 1000,
    "numbers": 1000,
    "long_ids": 1000,
    "tenant": 1800,
    "strange_ids": 1500,  # 300 sessions of 5 records: valid, so they contribute
    "null_call_id": 1500,
    "orphans": 1500,
}


@dataclass(frozen=True, slots=True)
class Record:
    """One input record as produced: raw key and value bytes (``None``: absent)."""

    topic: Kind
    key: bytes | None
    value: bytes | None
    category: str
    # A dead-letter reason, ``contributed``, or None for a valid record (replay decides).
    expect: str | None
    targeted: bool = False  # aimed at a valid session's id


def from_line(line: dict[str, Any]) -> Record:
    """A replay line (``bench.workload``) as the record ``tests.kafka_io.publish`` sends."""
    key = None if line["key"] is None else line["key"].encode()
    return Record(line["topic"], key, record_value(line["value"]), "valid", None)


def publish_records(bootstrap: str, records: Iterable[Record], topics: dict[str, str]) -> int:
    """``tests.kafka_io.publish`` for raw records: tombstones and non-UTF-8 bytes included."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    count = 0
    for record in records:
        producer.produce(topics[record.topic], record.value, record.key)
        count += 1
        if count % 5_000 == 0:
            producer.flush()
    assert producer.flush(60) == 0
    return count


def interleave(sequences: Sequence[Sequence[Record]], seed: int) -> list[Record]:
    """All records, shuffled, each sequence keeping its own order."""
    slots = [i for i, seq in enumerate(sequences) for _ in seq]
    random.Random(seed).shuffle(slots)
    its = [iter(seq) for seq in sequences]
    return [next(its[i]) for i in slots]


def nest_text(levels: int, kind: str, leaf: bytes = b'"x"') -> bytes:
    """JSON text of ``levels`` nested objects (or arrays) around ``leaf``: any depth."""
    if kind == "dict":
        return b'{"a":' * levels + leaf + b"}" * levels
    return b"[" * levels + leaf + b"]" * levels


def _with(doc: Any, placeholder: str, text: bytes) -> bytes:
    """``doc`` as JSON with the string ``placeholder`` replaced by raw JSON ``text``."""
    raw = orjson.dumps(doc)
    marker = orjson.dumps(placeholder)
    assert raw.count(marker) == 1
    return raw.replace(marker, text)


@dataclass(frozen=True, slots=True)
class Target:
    """A valid session and ids its records use (assistant message ids, tool-call ids)."""

    session: str
    call_ids: tuple[str, ...]


def targets_of(lines: Iterable[dict[str, Any]]) -> list[Target]:
    calls: dict[str, list[str]] = {}
    for line in lines:
        value = line["value"]
        if line["topic"] != "messages" or not isinstance(value, dict):
            continue
        ids = calls.setdefault(value["conversationId"], [])
        msg = value["message"]
        if msg["role"] == "ROLE_ASSISTANT":
            ids.append(msg["messageId"])
            ids.extend(call["id"] for call in msg.get("toolCalls", ()))
    return [Target(s, tuple(ids)) for s, ids in sorted(calls.items()) if ids]


class _Builder:
    def __init__(
        self, targets: list[Target], org_id: str, max_record_bytes: int, seed: int
    ) -> None:
        self.rnd = random.Random(seed)
        self.targets = targets
        self.valid = {t.session for t in targets}
        self.org_id = org_id
        self.max_record_bytes = max_record_bytes

    # -- helpers ---------------------------------------------------------------------

    def session(self, category: str, i: int) -> tuple[str, str | None, bool]:
        """A session id (every fourth one a valid session's), a call id, whether targeted."""
        if i % 4 == 0:
            target = self.rnd.choice(self.targets)
            return target.session, self.rnd.choice(target.call_ids), True
        return f"hostile-{category}-{i}", f"call-{category}-{i}", False

    def decision(self, session: str, call_id: str | None, i: int, **fields: Any) -> dict[str, Any]:
        """A decision that would be accepted but for ``fields``."""
        base = {"org_id": self.org_id, "decision_id": f"hd-{i}", "raw": {"i": i}}
        return decision(session, call_id, **{**base, **fields})

    def rec(
        self,
        topic: Kind,
        key: str | bytes | None,
        value: Any,
        category: str,
        expect: str,
        targeted: bool = False,
    ) -> Record:
        if isinstance(key, str):
            key = key.encode()
        if value is not None and not isinstance(value, bytes):
            value = orjson.dumps(value)
        return Record(topic, key, value, category, expect, targeted)

    # -- categories ------------------------------------------------------------------

    def invalid_json(self, i: int) -> Record:
        sid, call, targeted = self.session("json", i)
        good = orjson.dumps(assistant(sid, "x", message_id=call or "m"))
        variants: list[tuple[Kind, bytes]] = [
            ("messages", good[: len(good) // 2]),  # cut short
            ("messages", good + b" trailing"),
            ("decisions", b""),
            ("decisions", b"NaN"),
            ("messages", b"{'conversationId': 'single quotes'}"),
            ("decisions", b'{"decision_id": "d",}'),
            ("messages", b'{"conversationId": "\\ud800", "message": {"role": 1}}'),  # lone
            ("messages", b'{"conversationId": "a\x07b", "message": {"role": 1}}'),  # raw BEL
            ("decisions", b"\x00\x00\x00"),
            ("messages", b"[1, 2"),
            ("messages", b'{"conversationId": "' + sid.encode()),
            ("decisions", b"1e400"),  # infinity
        ]
        topic, value = variants[i % len(variants)]
        return self.rec(topic, sid, value, "invalid_json", "invalid_json", targeted)

    def non_utf8(self, i: int) -> Record:
        sid, _, targeted = self.session("utf8", i)
        good = orjson.dumps(message(sid, text="caf\u00e9"))
        variants: list[tuple[Kind, bytes | None, bytes]] = [
            ("messages", sid.encode(), good.replace("\u00e9".encode(), b"\xe9")),  # latin-1
            ("messages", sid.encode(), bytes(self.rnd.randrange(128, 256) for _ in range(64))),
            ("decisions", b"\xfe\xff" + str(i).encode(), b"\xff\xfe{\x00}\x00"),  # UTF-16
            ("decisions", sid.encode(), b"\xef\xbb\xbf" + good),  # a byte order mark
            ("messages", bytes([0x80 + i % 64]) * 8, good + b"\xff"),
        ]
        topic, key, value = variants[i % len(variants)]
        return self.rec(topic, key, value, "non_utf8", "invalid_json", targeted)

    def tombstone(self, i: int) -> Record:
        sid, _, targeted = self.session("tombstone", i)
        key = None if i % 5 == 1 else sid
        topic: Kind = "messages" if i % 2 else "decisions"
        return self.rec(topic, key, None, "tombstone", "invalid_json", targeted)

    def too_large(self, i: int) -> Record:
        sid, call, targeted = self.session("large", i)
        # Valid but for its size: a finished assistant message, or a decision joining a turn.
        over = self.max_record_bytes + 1 + self.rnd.randrange(4000)
        if i % 2:
            doc = assistant(sid, "PAD", message_id=call or "m")
            topic: Kind = "messages"
        else:
            doc = self.decision(sid, call, i, raw={"pad": "PAD"})
            topic = "decisions"
        raw = orjson.dumps(doc)
        raw = raw.replace(b"PAD", b"y" * (over - len(raw) + 3))
        assert len(raw) == over
        return self.rec(topic, sid, raw, "too_large", "too_large", targeted)

    def escapes(self, i: int) -> Record:
        """Records whose dead letter, JSON-escaped again, would be many times their size."""
        sid, call, targeted = self.session("escapes", i)
        kind = i % 8
        if kind == 0:  # ~90 KB of control characters in a string: \u0001 each, 6x, cut
            n = min(90_000 + self.rnd.randrange(6000), self.max_record_bytes - 2)
            assert 6 * n > DEAD_LETTER_MAX_BYTES
            value = b'"' + b"\x01" * n + b'"'
            return self.rec("messages", sid, value, "escapes", "invalid_json", targeted)
        if kind in (1, 2, 3):  # a key whose JSON (or base64) is past the dead letter's cut
            if kind == 3:
                key = b"\xfe" * (DEAD_LETTER_KEY_MAX_BYTES + 100) + str(i).encode()
            else:
                key = b"\x01\x1f" * (DEAD_LETTER_KEY_MAX_BYTES // 10) + str(i).encode()
            value = b'{"conversationId": "' + b"\x02" * 100
            return self.rec("messages", key, value, "escapes", "invalid_json")
        if kind in (4, 5):  # quotes in the text of a message with a bad role
            doc = message(sid, "ROLE_ROBOT", '"' * self.rnd.randrange(1000, 8000))
            return self.rec("messages", sid, doc, "escapes", "schema", targeted)
        if kind == 6:  # backslashes in raw, another tenant
            raw = {"q": "\\" * self.rnd.randrange(1000, 8000), "c": "\x00\x1f" * 500}
            doc = self.decision(sid, call, i, org_id="globex", raw=raw)
            return self.rec("decisions", sid, doc, "escapes", "tenant_mismatch", targeted)
        # an org id of 8,000 quotes and control characters: the error names it (clipped)
        doc = self.decision(sid, call, i, org_id='"\x01\\' * 3000)
        return self.rec("decisions", sid, doc, "escapes", "tenant_mismatch", targeted)

    def schema(self, i: int) -> Record:
        sid, call, targeted = self.session("schema", i)
        mid = call or "m"
        ok_msg = assistant(sid, "x", message_id=mid)
        no_role = {"conversationId": sid, "message": {"content": [{"text": "x"}]}}
        messages: list[Any] = [
            no_role,
            assistant(sid, "x", message_id=mid, finish="stop") | {"message": {"role": "ROBOT"}},
            message(sid, "ROLE_ROBOT", message_id=mid),
            message(sid, 7, message_id=mid),
            message(sid, True),
            message(sid, 1.5),
            message(sid, None),
            {"conversationId": sid, "message": {"role": 2, "content": "x"}},
            {"conversationId": sid, "message": {"role": 2, "content": [{"text": 1}]}},
            message(sid, "ROLE_ASSISTANT", content=[{"text": "a", "reasoning": "b"}]),
            message(sid, "ROLE_USER", content=[]),
            message(sid, "ROLE_ASSISTANT", content=None, text=None, message_id=mid),
            {"conversationId": 123, "message": ok_msg["message"]},
            {"conversationId": "", "message": ok_msg["message"]},
            {"conversationId": None, "message": ok_msg["message"]},
            {"message": ok_msg["message"]},
            {"conversationId": sid, "message": "hello"},
            {"conversationId": sid, "message": None},
            [ok_msg],
            42,
            "a string",
            b"null",  # JSON null, not a tombstone
            assistant(sid, message_id=mid, tool_calls=[{"id": "c", "arguments": "{}"}]),
            assistant(sid, message_id=mid, tool_calls=[tool_call("c", arguments=42)]),
            assistant(sid, message_id=mid, sequence="12a"),
            assistant(sid, message_id=mid, sequence=True),
            assistant(sid, message_id=mid, publishedAt="yesterday"),
            assistant(sid, message_id=mid, finish=1),
            assistant(sid, message_id=1),
            message(sid, "ROLE_TOOL", content=[{"toolResult": {"result": 1}}]),
        ]
        good = self.decision(sid, call, i)
        decisions: list[Any] = [
            {k: v for k, v in good.items() if k != "decision_id"},
            {k: v for k, v in good.items() if k != "session_id"},
            {k: v for k, v in good.items() if k != "occurred_at"},
            good | {"accepted": "yes"},
            good | {"accepted": 1},
            good | {"agent_harness": "vim"},
            good | {"interaction_mode": "auto"},
            good | {"extra": 1},
            good | {"edit_retention_score": 1.5},
            good | {"observation_delay_ms": -1},
            good | {"observation_delay_ms": 1.5},
            good | {"occurred_at": "not a date"},
            good | {"occurred_at": "2026-13-01T00:00:00Z"},
            good | {"captured_at": 5},
            good | {"raw": []},
            good | {"raw": None},
            good | {"session_id": 5},
            good | {"file_path": None},
            good | {"call_id": 7},
            good | {"user_id": ["dev"]},
            [good],
            "decision",
        ]
        if i % 2:
            return self.rec(
                "messages", sid, messages[i // 2 % len(messages)], "schema", "schema", targeted
            )
        doc = decisions[i // 2 % len(decisions)]
        return self.rec("decisions", sid, doc, "schema", "schema", targeted)

    def instants(self, i: int) -> Record:
        sid, call, targeted = self.session("instants", i)
        values = [
            "0001-01-01T00:00:00Z",
            "9999-12-31T23:59:59Z",
            "1969-12-31T23:59:59.999999999Z",
            "1970-01-01T00:30:00+01:00",
            "2200-01-01T00:00:00Z",
            "2199-12-31T23:30:00-01:00",
        ]
        field = "occurred_at" if i % 3 else "captured_at"
        doc = self.decision(sid, call, i, **{field: values[i % len(values)]})
        return self.rec("decisions", sid, doc, "instants", "schema", targeted)

    def deep(self, i: int) -> Record:
        sid, call, targeted = self.session("deep", i)
        levels = [MAX_DEPTH, 100, 255, 300, 1000][i % 5]
        where = i // 5 % 5
        kind = "dict" if i // 25 % 2 else "list"
        deep = nest_text(levels, kind)
        if where == 0:  # a decision's raw
            doc = self.decision(sid, call, i, raw={"a": "DEEP"})
            return self.rec("decisions", sid, _with(doc, "DEEP", deep), "deep", "schema", targeted)
        if where == 1:  # tool-call arguments as an object
            doc = assistant(
                sid, message_id=call or "m", tool_calls=[tool_call("c1", arguments={"a": "DEEP"})]
            )
            return self.rec("messages", sid, _with(doc, "DEEP", deep), "deep", "schema", targeted)
        if where == 2:  # tool-call arguments as JSON text, nested on their own
            text = b'{"a":' + nest_text(levels, kind) + b"}"
            doc = assistant(
                sid, message_id=call or "m", tool_calls=[tool_call("c1", arguments=text.decode())]
            )
            return self.rec("messages", sid, doc, "deep", "schema", targeted)
        if where == 3:  # a tool result
            content = [{"toolResult": {"toolCallId": call or "c", "result": "DEEP"}}]
            doc = message(sid, "ROLE_TOOL", content=content, message_id=f"t{i}")
            return self.rec("messages", sid, _with(doc, "DEEP", deep), "deep", "schema", targeted)
        # the whole record, past orjson's own 1024 levels
        return self.rec("messages", sid, nest_text(1100, kind, b"1"), "deep", "schema", targeted)

    def numbers(self, i: int) -> Record:
        sid, call, targeted = self.session("numbers", i)
        sequences = [
            b'"99999999999999999999"',
            b"1e20",
            b"99999999999999999999",
            b'"-9223372036854775809"',
            b"9223372036854775808",
        ]
        delays = [b"1e20", b"99999999999999999999", b"9223372036854775808"]
        if i % 2:
            doc = assistant(sid, message_id=call or "m", sequence="NUM")
            value = _with(doc, "NUM", sequences[i // 2 % len(sequences)])
            return self.rec("messages", sid, value, "numbers", "schema", targeted)
        doc = self.decision(sid, call, i, observation_delay_ms="NUM")
        value = _with(doc, "NUM", delays[i // 2 % len(delays)])
        return self.rec("decisions", sid, value, "numbers", "schema", targeted)

    def long_ids(self, i: int) -> Record:
        sid, call, targeted = self.session("ids", i)
        n = MAX_ID_CHARS + 1 + self.rnd.randrange(3000)
        long = ("\u00e9" if i % 3 else "i") * n
        mid = call or "m"
        variants: list[tuple[Kind, Any, bool]] = [
            ("messages", assistant(long, message_id="m"), False),
            ("messages", assistant(sid, message_id=mid, eventId=long), targeted),
            ("messages", assistant(sid, message_id=long), targeted),
            ("messages", assistant(sid, message_id=mid, tool_calls=[tool_call(long)]), targeted),
            (
                "messages",
                message(
                    sid, "ROLE_TOOL", content=[{"toolResult": {"toolCallId": long, "result": 1}}]
                ),
                targeted,
            ),
            ("decisions", self.decision(sid, call, i, decision_id=long), targeted),
            ("decisions", self.decision(long, call, i), False),
            ("decisions", self.decision(sid, long, i), targeted),
        ]
        topic, doc, aimed = variants[i % len(variants)]
        key = long if not aimed and i % 8 in (0, 6) else sid
        return self.rec(topic, key, doc, "long_ids", "schema", aimed)

    def tenant(self, i: int) -> Record:
        sid, call, targeted = self.session("tenant", i)
        orgs = ["globex", "Acme Corp", "default-2", "d\u00e9fault", "defaul", "\x00default"]
        org = orgs[i % len(orgs)]
        if i % 2:  # would complete a turn of its session
            doc = assistant(sid, "other tenant", message_id=f"tenant-{i}", orgId=org)
            return self.rec("messages", sid, doc, "tenant", "tenant_mismatch", targeted)
        doc = self.decision(sid, call, i, org_id=org)  # would join the session's turn
        return self.rec("decisions", sid, doc, "tenant", "tenant_mismatch", targeted)

    def null_call_id(self, i: int) -> Record:
        sid = f"hostile-null-{i % 100}"
        harness = ["claude-code", "copilot", "codex", "pi"][i % 4]
        doc = self.decision(sid, None, i, agent_harness=harness, file_path=f"src/null/{i}.py")
        return self.rec("decisions", sid, doc, "null_call_id", "unattributable_decision")

    def orphans(self, i: int) -> Record:
        sid = f"hostile-orphan-{i % 150}"
        doc = self.decision(sid, f"nothing-{i}", i, file_path=f"src/orphan/{i}.py")
        return self.rec("decisions", sid, doc, "orphans", CONTRIBUTED)

    def strange_session(self, i: int) -> list[Record]:
        """A valid session whose id holds NUL, quotes, backslashes or any Unicode, reusing
        a valid session's inference-call and tool-call ids: its own turns, keyed apart."""
        target = self.targets[i % len(self.targets)]
        v = target.session
        shapes = [
            f"nul\x00{i}",
            f'quote"{i}',
            f"back\\slash{i}\\",
            f"\U0001f600 emoji {i}",
            f"\u202eRTL{i}",
            f"e\u0301{i}",
            f"tab\t{i}\nnewline",
            f'["json",{i}]',
            f"colon:{i}:x",
            f"{v}\x00",
            f'{v}"',
            f"{v}\\",
            f" {v}",
            f"{v} ",
            f"\x7f\x1b[31m{i}",
            "\u00e9" * 1000 + f"-{i}",
            ("x" * MAX_ID_CHARS + str(i))[-MAX_ID_CHARS:],  # exactly at the cap
            f"\ufeff{i}\u2028\u2029",
            f"\U0010fffd{i}\u0000\u0001",
            f'\\"\x00\\u0000{i}',
        ]
        sid = shapes[i % len(shapes)]
        if i >= len(shapes):
            sid = f"{sid}#{i}"
        sid = sid[:MAX_ID_CHARS]
        assert sid not in self.valid
        first = target.call_ids[0]  # an inference-call id a valid session uses too
        tool = target.call_ids[-1]
        final = f"{first}-final"
        records: list[tuple[Kind, Any]] = [
            ("messages", message(sid, "ROLE_USER", f"question {sid}", message_id=f"u{i}")),
            (
                "messages",
                assistant(
                    sid,
                    f"reading {sid}",
                    message_id=first,
                    finish="tool_calls",
                    tool_calls=[tool_call(tool, arguments={"path": sid, "q": '"\\\x00'})],
                ),
            ),
            ("decisions", self.decision(sid, tool, i, decision_id=f"sd-{i}", raw={"s": sid})),
            (
                "messages",
                message(
                    sid,
                    "ROLE_TOOL",
                    content=[{"toolResult": {"toolCallId": tool, "result": {"sid": sid}}}],
                    message_id=f"t{i}",
                ),
            ),
            ("messages", assistant(sid, f"done {sid}", message_id=final)),
        ]
        return [self.rec(t, sid, doc, "strange_ids", CONTRIBUTED) for t, doc in records]


def hostile_records(
    valid_lines: Sequence[dict[str, Any]],
    org_id: str,
    max_record_bytes: int,
    seed: int = 10,
    counts: dict[str, int] = COUNTS,
) -> list[list[Record]]:
    """Sequences of hostile records (a strange session's records in its order)."""
    b = _Builder(targets_of(valid_lines), org_id, max_record_bytes, seed)
    out: list[list[Record]] = []
    for category, n in counts.items():
        if category == "strange_ids":
            out += [b.strange_session(i) for i in range(n // 5)]
            continue
        build: Callable[[int], Record] = getattr(b, category)
        out += [[build(i)] for i in range(n)]
    return out

"""``python -m bench --redaction``: what Basic redaction costs and what it takes that it
should not, no broker.

- Per decision: ``redact`` on a decision's ``raw`` against the whole decode of the same
  decision record (JSON, validation, tenant, redaction, the redacted copy kept for a later
  dead letter), for three payloads: the benchmark workload's (a hook event with ids and a
  path), a hook event carrying an edit of code, and one full of credentials; in µs per
  decision and per KB of ``raw``.
- ``STREAM_APP_REDACT_CONTENT``: the decode of message records with it off and on, in µs
  per KB of message, for the example session's messages, the workload's (prose and tool
  loops) and messages whose tool results are this project's own source files (code).
- False positives: every string of the example session and of the workload, and every
  line of the project's source, redacted; what changed is counted and named. The example
  session plants two credentials in its decisions (an API key and a bearer token): those
  are the changes expected there.

One process and one run; times are the best of five, on a shared machine.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from bench.workload import generate
from stream_app.core.intake import decode
from stream_app.core.policy import Policy
from stream_app.core.records import SourceRecord
from stream_app.core.redaction import redact, redact_text

ROOT = Path(__file__).resolve().parent.parent

CODE = '''def paginate(items, page, size):
    """One page of ``items``; pages count from 1."""
    start = (page - 1) * size
    password_field = form.get("password")  # a field name, kept
    return items[start : start + size]
'''


def _fake(prefix: str, n: int) -> str:
    """A fake token: ``prefix`` and a run of sequential characters."""
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return prefix + "".join(alphabet[i % len(alphabet)] for i in range(n))


PAYLOADS: dict[str, dict[str, Any]] = {
    # bench/workload.py's decisions
    "workload": {
        "hook": "PostToolUse",
        "tool_use_id": "toolu_sess-00001_3",
        "cwd": "/home/dev/shop",
    },
    "code edit": {
        "hook_event_name": "PostToolUse",
        "session_id": "sess-00001",
        "transcript_path": "/home/dev/.claude/projects/shop/sess-00001.jsonl",
        "cwd": "/home/dev/shop",
        "tool_name": "Edit",
        "tool_input": {
            "file_path": "/home/dev/shop/src/paginate.py",
            "old_string": CODE,
            "new_string": CODE.replace("(page - 1)", "max(page - 1, 0)"),
        },
        "tool_response": {"filePath": "/home/dev/shop/src/paginate.py", "success": True},
        "usage": {"input_tokens": 5120, "output_tokens": 312, "max_tokens": 8192},
    },
    "credentials": {
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {
            "command": "curl -u deploy:" + _fake("Pa55-", 12) + " -H 'Authorization: Bearer "
            f"{_fake('ey' + 'J', 40)}' 'https://api.example.com/v1?api_key={_fake('', 32)}'",
        },
        "env": {
            "STRIPE_KEY": _fake("sk" + "_live_", 24),
            "GOOGLE_API_KEY": _fake("AI" + "za", 35),
            "NPM_TOKEN": _fake("np" + "m_", 36),
            "DATABASE_URL": "postgres://app:" + _fake("p@ss", 10) + "@db.example.com/shop",
        },
        "config": "[default]\naws_secret_access_key = " + _fake("", 40) + "\n",
        "webhook": "https://hooks.slack.com/services/" + _fake("T0", 30),
        "passwords": [_fake("", 12)],
        _fake("gh" + "p_", 36): "a token used as a key",
    },
}


def _decision(raw: dict[str, Any]) -> bytes:
    return orjson.dumps(
        {
            "decision_id": "d1",
            "session_id": "sess-00001",
            "user_id": "dev-1",
            "agent_harness": "claude-code",
            "file_path": "src/paginate.py",
            "accepted": True,
            "explicit": True,
            "interaction_mode": "agent",
            "commit_sha": None,
            "call_id": "toolu_sess-00001_3",
            "edit_retention_score": None,
            "observation_delay_ms": None,
            "occurred_at": "2026-11-29T10:00:00Z",
            "captured_at": "2026-11-29T10:00:00Z",
            "raw": raw,
        }
    )


def _per_call_us(fn: Callable[[], object], seconds: float = 0.4) -> float:
    """The best of five timings of ``fn``, in microseconds per call."""
    n = 1
    while True:  # enough calls for about a fifth of ``seconds``
        started = time.perf_counter()
        for _ in range(n):
            fn()
        elapsed = time.perf_counter() - started
        if elapsed > seconds / 5:
            break
        n *= 2
    best = elapsed
    for _ in range(4):
        started = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, time.perf_counter() - started)
    return best / n * 1e6


def _per_decision() -> dict[str, dict[str, float]]:
    policy = Policy(org_id="default")
    results = {}
    for name, raw in PAYLOADS.items():
        record = SourceRecord("decisions", "developer.decisions", 0, 0, None, _decision(raw))
        item, out = decode(record, policy, 0.0)
        assert item is not None and not out.dead_letters, out.dead_letters
        redact_us = _per_call_us(partial(redact, raw))
        decode_us = _per_call_us(partial(decode, record, policy, 0.0))
        raw_bytes = len(orjson.dumps(raw))
        results[name] = {
            "raw_bytes": raw_bytes,
            "redact_us": redact_us,
            "redact_us_per_kb": redact_us / raw_bytes * 1024,
            "decode_us": decode_us,
            "share_of_decode": redact_us / decode_us,
        }
    return results


def example_lines() -> list[dict[str, Any]]:
    text = resources.files("stream_app.examples").joinpath("session.jsonl").read_text()
    return [orjson.loads(line) for line in text.splitlines() if line.strip()]


def _source_files() -> list[Path]:
    return sorted([*ROOT.glob("stream_app/**/*.py"), *ROOT.glob("bench/*.py")])


def _message_records() -> dict[str, list[bytes]]:
    """Message records by kind of content, as a worker reads them."""
    code = [
        {
            "conversationId": "sess-code",
            "message": {
                "role": "ROLE_TOOL",
                "messageId": f"t{i}",
                "content": [{"toolResult": {"toolCallId": f"c{i}", "result": p.read_text()}}],
            },
        }
        for i, p in enumerate(_source_files())
    ]
    return {
        "example": [
            orjson.dumps(line["value"])
            for line in example_lines()
            if line["topic"] == "messages" and isinstance(line["value"], dict)
        ],
        "workload": [
            orjson.dumps(line["value"])
            for line in generate(3000, 30, seed=11)
            if line["topic"] == "messages" and isinstance(line["value"], dict)
        ],
        "code": [orjson.dumps(c) for c in code],
    }


def _content() -> dict[str, dict[str, float]]:
    results = {}
    off, on = Policy(org_id="default"), Policy(org_id="default", redact_content=True)
    for name, values in _message_records().items():
        records = [
            SourceRecord("messages", "llm.messages", 0, i, None, v) for i, v in enumerate(values)
        ]

        def decode_all(policy: Policy, records: list[SourceRecord] = records) -> None:
            for record in records:
                decode(record, policy, 0.0)

        kb = sum(len(v) for v in values) / 1024
        off_us = _per_call_us(partial(decode_all, off), seconds=1.0)
        on_us = _per_call_us(partial(decode_all, on), seconds=1.0)
        results[name] = {
            "messages": len(values),
            "kb": kb,
            "off_us_per_kb": off_us / kb,
            "on_us_per_kb": on_us / kb,
            "redaction_us_per_kb": (on_us - off_us) / kb,
        }
    return results


def _strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string of a JSON value, keys too, with where it is."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield f"{path}/{k} (key)", k
            yield from _strings(v, f"{path}/{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{path}/{i}")


def changed_strings(values: list[Any]) -> dict[str, Any]:
    """How many strings the values hold, keys too, and where redaction changes one."""
    strings = [s for i, v in enumerate(values) for s in _strings(v, f"record {i}")]
    changed = [where for where, s in strings if redact_text(s) != s]
    return {"strings": len(strings), "changed": len(changed), "where": changed}


def false_positives() -> dict[str, dict[str, Any]]:
    """What redaction changes in content that holds no credential but what is planted."""
    found = {
        "example session": changed_strings([line["value"] for line in example_lines()]),
        "workload": changed_strings([line["value"] for line in generate(20_000, 200, seed=7)]),
    }
    lines = [
        (f"{p.relative_to(ROOT)}:{n}", line)
        for p in _source_files()
        for n, line in enumerate(p.read_text().splitlines(), 1)
    ]
    changed = [where for where, line in lines if redact_text(line) != line]
    found["project source lines"] = {
        "strings": len(lines),
        "changed": len(changed),
        "where": changed,
    }
    return found


def measure() -> dict[str, Any]:
    gc.collect()
    return {
        "per_decision": _per_decision(),
        "content": _content(),
        "false_positives": false_positives(),
    }


def report(results: dict[str, Any]) -> str:
    lines = ["redaction per decision (best of 5), against the whole decode of that decision:"]
    for name, r in results["per_decision"].items():
        lines.append(
            f"  {name:<12} raw {r['raw_bytes']:>5.0f} B: redact {r['redact_us']:6.1f} us "
            f"({r['redact_us_per_kb']:5.0f} us/KB), decode {r['decode_us']:6.1f} us "
            f"({r['share_of_decode']:.0%} of decode)"
        )
    lines.append("STREAM_APP_REDACT_CONTENT: decode of message records, per KB of message:")
    for name, r in results["content"].items():
        lines.append(
            f"  {name:<12} {r['messages']:>5} messages, {r['kb']:7.1f} KB: off "
            f"{r['off_us_per_kb']:6.1f} us/KB, on {r['on_us_per_kb']:6.1f} us/KB "
            f"(redaction {r['redaction_us_per_kb']:6.1f} us/KB)"
        )
    lines.append("false positives (strings changed by redaction):")
    for name, r in results["false_positives"].items():
        lines.append(f"  {name:<21} {r['changed']:>4} of {r['strings']:>7}")
        lines += [f"    {where}" for where in r["where"][:20]]
        if len(r["where"]) > 20:
            lines.append(f"    ... and {len(r['where']) - 20} more")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(measure()))

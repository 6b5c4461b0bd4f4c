"""``python -m bench --redaction``: what Basic redaction costs per decision, no broker.

Times ``redact`` on a decision's ``raw`` and the whole decode of the same decision record
(JSON, validation, tenant, redaction, the redacted copy kept for a later dead letter), in
one process and one run, for three payloads: the benchmark workload's (a hook event with
ids and a path), a hook event carrying an edit of code, and one full of credentials.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import orjson

from stream_app.core.intake import decode
from stream_app.core.policy import Policy
from stream_app.core.records import SourceRecord
from stream_app.core.redaction import redact

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


def measure() -> dict[str, dict[str, float]]:
    policy = Policy(org_id="default")
    results = {}
    gc.collect()
    for name, raw in PAYLOADS.items():
        record = SourceRecord("decisions", "developer.decisions", 0, 0, None, _decision(raw))
        item, out = decode(record, policy, 0.0)
        assert item is not None and not out.dead_letters, out.dead_letters
        redact_us = _per_call_us(partial(redact, raw))
        decode_us = _per_call_us(partial(decode, record, policy, 0.0))
        results[name] = {
            "raw_bytes": len(orjson.dumps(raw)),
            "redact_us": redact_us,
            "decode_us": decode_us,
            "share_of_decode": redact_us / decode_us,
        }
    return results


def report(results: dict[str, dict[str, float]]) -> str:
    lines = ["redaction per decision (best of 5), against the whole decode of that decision:"]
    for name, r in results.items():
        lines.append(
            f"  {name:<12} raw {r['raw_bytes']:>5.0f} B: redact {r['redact_us']:6.1f} us, "
            f"decode {r['decode_us']:6.1f} us ({r['share_of_decode']:.0%} of decode)"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(measure()))

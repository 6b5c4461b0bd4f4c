"""Issue 52 item 7: export's memory does not grow with its input. dpo keeps the turns it pairs
on disk, and the stage counts each shard's sessions and each split's prompts on disk: Python's
allocations while writing 4N turns peak where they do for N (``tracemalloc``, which sees
Python's allocations, not SQLite's bounded page cache)."""

from __future__ import annotations

import functools
import random
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import orjson
import pytest

from stream_app.datasets import files, preferences
from stream_app.datasets.options import Options, Split
from stream_app.datasets.record_types import Item, Record
from stream_app.datasets.skips import SkipReason, Skips
from stream_app.datasets.split import split_of
from stream_app.datasets.turn_lines import SessionTurn, TurnLines
from stream_app.datasets.writers import SplitFiles
from stream_app.models.turn import TurnDict
from tests.datasets.test_verdicts import verdict_turns
from tests.factories import decision

# What Python may allocate beyond the smaller run's peak at four times its size: a constant
# (what dpo and the stage held grew by 140 to 500 bytes a turn: 400 KiB and more here).
MARGIN = 128 * 1024
N = 500


@functools.cache
def _base() -> bytes:
    return orjson.dumps(orjson.loads(verdict_turns().split(b"\n", 1)[0])["value"])


def _turn(call_id: str, prompt: str, accepted: bool, answer: str) -> TurnDict:
    """A turn of the verdict workload whose prompt's first message says ``prompt``, whose
    answer says ``answer``, with an explicit verdict."""
    value = orjson.loads(_base())
    user, completing = value["new_messages"][0], value["new_messages"][-1]
    assert user["role"] == "user" and completing["finish_reason"] is not None
    value["inference_call_id"] = call_id
    value["new_messages"] = [
        {**user, "parts": [{"type": "text", "content": prompt}]},
        {**completing, "parts": [{"type": "text", "content": answer}]},
    ]
    at = "2026-11-29T10:00:00Z"
    verdict = decision("s", None, decision_id="d", occurred_at=at, captured_at=at, user_id="u")
    value["decisions"] = [{**verdict, "accepted": accepted, "explicit": True}]
    return cast(TurnDict, value)


Answer = tuple[str, bool, str]  # a turn's prompt, verdict and answer


def _sessions(answers: Callable[[], Iterator[Answer]]) -> Callable[..., Any]:
    """``turn_lines.sessions`` over turns made as they are asked for, one a session: what
    dpo reads, without an index that grows with them."""

    def sessions(read: TurnLines, skips: Skips) -> Iterator[tuple[str, list[SessionTurn]]]:
        for i, (prompt, accepted, answer) in enumerate(answers()):
            key = orjson.dumps([f"s{i}", f"c{i}"]).decode()
            yield f"s{i}", [SessionTurn(key, _turn(f"c{i}", prompt, accepted, answer))]

    return sessions


@dataclass
class _Recorded(Skips):
    """Skips that remember every one, in order (``listed`` names only some reasons)."""

    every: list[tuple[str | None, SkipReason]] = field(default_factory=list)

    def add(self, key: str | None, reason: SkipReason) -> None:
        super().add(key, reason)
        self.every.append((key, reason))


def _dpo(
    monkeypatch: pytest.MonkeyPatch, answers: Callable[[], Iterator[Answer]], skips: Skips
) -> Iterator[Item]:
    monkeypatch.setattr(preferences, "sessions", _sessions(answers))
    options = Options(format="dpo", keep_credentials=True)
    return preferences.dpo_rows(TurnLines(), options, skips)


def _peak(run: Callable[[], None]) -> int:
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _one_prompt(n: int) -> Callable[[], Iterator[Answer]]:
    return lambda: (("one prompt", i % 2 == 0, f"answer {i}") for i in range(n))


def _two_a_prompt(n: int) -> Callable[[], Iterator[Answer]]:
    return lambda: ((f"prompt {i // 2}", i % 2 == 0, f"answer {i}") for i in range(n))


@pytest.mark.parametrize("answers", [_one_prompt, _two_a_prompt], ids=["one-prompt", "prompts"])
def test_dpo_memory_does_not_grow_with_its_answers_or_its_prompts(
    answers: Callable[[int], Callable[[], Iterator[Answer]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """N judged turns, then 4N, of one prompt (its answers) or of N/2 prompts (the prompts):
    the peak of Python's allocations does not follow."""
    _base()
    peaks, pairs = [], []
    for n in (N, 4 * N):
        written = [0]

        def run(n: int = n, written: list[int] = written) -> None:
            for _ in _dpo(monkeypatch, answers(n), Skips()):
                written[0] += 1

        peaks.append(_peak(run))
        pairs.append(written[0])
    assert pairs[0] > 0
    assert peaks[1] < peaks[0] + MARGIN, peaks


def _reference(answers: list[Answer]) -> tuple[list[tuple[int, int]], list[tuple[int, str]]]:
    """dpo's pairing and skips as the plain rule says them, all in memory: prompts in the
    order first met; a prompt's accepted turns in order, each with the first rejected one
    not in a pair that answered otherwise, at most MAX_PAIRS; then its accepted turns in no
    pair, then its rejected ones, each with why."""
    prompts: dict[str, tuple[list[int], list[int]]] = {}
    for i, (prompt, accepted, _) in enumerate(answers):
        prompts.setdefault(prompt, ([], []))[0 if accepted else 1].append(i)
    pairs: list[tuple[int, int]] = []
    skipped: list[tuple[int, str]] = []
    for chosen, rejected in prompts.values():
        made: list[tuple[int, int]] = []
        for c in chosen:
            if len(made) >= preferences.MAX_PAIRS:
                break
            taken = {r for _, r in made}
            free = [r for r in rejected if r not in taken and answers[r][2] != answers[c][2]]
            if free:
                made.append((c, free[0]))
        pairs.extend(made)
        for side, others, taken in (
            (chosen, rejected, {c for c, _ in made}),
            (rejected, chosen, {r for _, r in made}),
        ):
            for i in side:
                if i in taken:
                    continue
                if others and all(answers[o][2] == answers[i][2] for o in others):
                    skipped.append((i, "identical_responses"))
                elif len(made) >= preferences.MAX_PAIRS:
                    skipped.append((i, "pair_limit"))
                else:
                    skipped.append((i, "unpaired"))
    return pairs, skipped


@pytest.mark.parametrize("seed", range(40))
def test_dpo_pairs_and_skips_as_the_plain_rule_says(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Prompts of a few answers, few distinct (so that identical responses, unpaired turns
    and full prompts all happen), interleaved: the pairs, in order, and every skip, in the
    order added, are those of the rule done in memory."""
    draw = random.Random(seed)
    prompts = draw.randint(1, 4)
    answers: list[Answer] = [
        (f"p{draw.randrange(prompts)}", draw.random() < 0.5, f"a{draw.randrange(3)}")
        for _ in range(draw.randint(1, 24))
    ]
    skips = _Recorded()
    items = list(_dpo(monkeypatch, lambda: iter(answers), skips))
    pairs, skipped = _reference(answers)
    assert [(_index(item.keys[0]), _index(item.keys[1])) for item in items] == pairs
    assert [(_index(key), reason.value) for key, reason in skips.every] == skipped


def _index(key: str | None) -> int:
    """The number of the turn a key of ``_sessions`` names."""
    return int(orjson.loads(cast(str, key))[0][1:])


def _sessions_of(i: int, n: int) -> list[str]:
    """The sessions of the i-th of ``_items(n)``: its own, and every fifth another's."""
    return [f"s{i // 3}", *([f"s{(i * 7919) % n // 3}"] if i % 5 == 0 else [])]


def _items(n: int) -> Callable[..., Iterator[Item]]:
    """``formats.records`` of n chat-like examples: three of a session, one after another,
    each session's examples on the prompts of its own and of the next session (so some
    prompts are in both splits); and a key of another session, as a dpo pair has."""

    def records(read: TurnLines, options: Options, skips: Skips) -> Iterator[Item]:
        for i in range(n):
            keys = tuple(orjson.dumps([s, f"c{i}"]).decode() for s in _sessions_of(i, n))
            record = cast(Record, {"n": i})
            yield Item(f"s{i // 3}", record, f"p{i // 3 + i % 2}", None, keys)

    return records


def _stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int, shard_bytes: int = 0
) -> tuple[int, dict[Split, SplitFiles]]:
    monkeypatch.setattr(files, "records", _items(n))
    options = Options(format="chat", eval_fraction=0.4)
    outs: dict[Split, SplitFiles] = {}
    for split in ("train", "eval"):

        def shard_of(k: int, split: Split = split) -> tuple[Path, Path | None]:
            return tmp_path / f"{split}-{k}.jsonl", None

        outs[split] = SplitFiles(
            split, shard_of(0)[0], None, shard_of=shard_of, shard_bytes=shard_bytes
        )
    _, shared = files._stage(TurnLines(), options, outs, lambda p: p, False, None)
    return shared, outs


def test_the_stage_counts_each_shards_sessions_and_the_shared_prompts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The counts the manifest gives, as sets of the examples written would count them."""
    n = 600
    shared, outs = _stage(tmp_path, monkeypatch, n, shard_bytes=500)
    sides: dict[str, set[Split]] = {}
    shards: dict[Split, list[set[str]]] = {"train": [], "eval": []}
    for item in _items(n)(TurnLines(), Options(), Skips()):
        split = split_of(item.split_key, 0.4)
        assert item.prompt is not None
        sides.setdefault(item.prompt, set()).add(split)
    for split, target in outs.items():
        for k, shard in enumerate(target.shards):
            rows = [orjson.loads(x)["n"] for x in (tmp_path / f"{split}-{k}.jsonl").open("rb")]
            shards[split].append({s for i in rows for s in _sessions_of(i, n)})
            assert shard.records == len(rows)
    assert shared == sum(1 for s in sides.values() if len(s) == 2) > 0
    for split, target in outs.items():
        assert len(target.shards) > 1
        assert [s.sessions for s in target.shards] == [len(s) for s in shards[split]]


def test_the_stages_memory_does_not_grow_with_its_sessions_or_prompts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    peaks = []
    for n in (3 * N, 12 * N):
        where = tmp_path / str(n)
        where.mkdir()

        def run(n: int = n, where: Path = where) -> None:
            _stage(where, monkeypatch, n)

        peaks.append(_peak(run))
    assert peaks[1] < peaks[0] + MARGIN, peaks

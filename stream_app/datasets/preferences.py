"""Preference rows from the verdicts: kto (one row per turn) and dpo (accepted and rejected
pairs of one prompt)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from stream_app.datasets.conversation import conversation, prompt_hash, response_bytes
from stream_app.datasets.options import Options
from stream_app.datasets.profiles import pair_row
from stream_app.datasets.record_types import ChatMessage, ExampleMetadata, Item, KtoRow
from stream_app.datasets.skips import SkipReason, Skips
from stream_app.datasets.turn_lines import SessionTurn, TurnLines, sessions
from stream_app.datasets.verdicts import metadata, verdict

MAX_PAIRS = 3  # dpo: pairs written per prompt


def kto_rows(
    session_id: str, turns: list[SessionTurn], options: Options, skips: Skips
) -> Iterator[Item]:
    """One row per turn with a verdict: TRL's unpaired preference format, conversational."""
    for step in conversation(session_id, turns, options, skips):
        label = verdict(step.turn, options.include_implicit)
        if isinstance(label, SkipReason):
            skips.add(step.key, label)
            continue
        prompt = list(step.before)
        row: KtoRow = {"prompt": prompt, "completion": [step.completion], "label": label}
        key = prompt_hash(prompt)
        meta = {**metadata(session_id, step.turn), "prompt_sha256": key}
        yield Item(key, row, key, meta, (step.key,))


@dataclass(slots=True)
class _Prompt:
    prompt: list[ChatMessage]
    chosen: list[tuple[str, ChatMessage, ExampleMetadata]] = field(default_factory=list)
    rejected: list[tuple[str, ChatMessage, ExampleMetadata]] = field(default_factory=list)


def dpo_rows(read: TurnLines, options: Options, skips: Skips) -> Iterator[Item]:
    """Pairs of an accepted and a rejected turn with one prompt, at most ``MAX_PAIRS`` a
    prompt, in the order the prompts were first met. Holds every turn with a verdict until
    the input is read: a prompt's turns may be anywhere in it."""
    prompts: dict[str, _Prompt] = {}
    for session_id, turns in sessions(read, skips):
        for step in conversation(session_id, turns, options, skips):
            label = verdict(step.turn, options.include_implicit)
            if isinstance(label, SkipReason):
                skips.add(step.key, label)
                continue
            key = prompt_hash(step.before)
            entry = prompts.setdefault(key, _Prompt(list(step.before)))
            side = entry.chosen if label else entry.rejected
            side.append((step.key, step.completion, metadata(session_id, step.turn)))
    profile = options.chosen_profile
    for key, entry in prompts.items():
        used: set[int] = set()
        identical: set[int] = set()
        pairs = 0
        chosen_left: list[str] = []
        for ck, chosen, cmeta in entry.chosen:
            partner = None
            for j, (_, rejected, _) in enumerate(entry.rejected):
                if j in used:
                    continue
                if response_bytes(rejected) == response_bytes(chosen):
                    identical.add(j)
                    continue
                partner = j
                break
            if partner is None or pairs >= MAX_PAIRS:
                same = any(
                    response_bytes(r) == response_bytes(chosen) for _, r, _ in entry.rejected
                )
                reason = (
                    SkipReason.PAIR_LIMIT
                    if pairs >= MAX_PAIRS and partner is not None
                    else SkipReason.IDENTICAL_RESPONSES
                    if same
                    else SkipReason.UNPAIRED
                )
                skips.add(ck, reason)
                chosen_left.append(ck)
                continue
            used.add(partner)
            pairs += 1
            rk, rejected, rmeta = entry.rejected[partner]
            meta = {"prompt_sha256": key, "chosen": cmeta, "rejected": rmeta}
            yield Item(key, pair_row(entry.prompt, chosen, rejected, profile), key, meta, (ck, rk))
        for j, (rk, _, _) in enumerate(entry.rejected):
            if j not in used:
                reason = (
                    SkipReason.PAIR_LIMIT
                    if pairs >= MAX_PAIRS
                    else SkipReason.IDENTICAL_RESPONSES
                    if j in identical
                    else SkipReason.UNPAIRED
                )
                skips.add(rk, reason)

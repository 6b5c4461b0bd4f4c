"""Preference rows from the verdicts: kto (one row per turn) and dpo (accepted and rejected
pairs of one prompt)."""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, NamedTuple, cast

import orjson

from stream_app.datasets.conversation import (
    TurnStep,
    conversation,
    prompt_hash,
    response_bytes,
)
from stream_app.datasets.options import Options
from stream_app.datasets.profiles import pair_row
from stream_app.datasets.record_types import ChatMessage, Item, KtoRow
from stream_app.datasets.skips import SkipReason, Skips
from stream_app.datasets.turn_lines import SessionTurn, TurnLines, sessions
from stream_app.datasets.verdicts import metadata, verdict

MAX_PAIRS = 3  # dpo: pairs written per prompt


def _judged(
    session_id: str, turns: list[SessionTurn], options: Options, skips: Skips
) -> Iterator[tuple[TurnStep, bool]]:
    """The session's turns that have a verdict, each with it (accepted or not); a turn
    without one is counted in ``skips`` with the reason."""
    for step in conversation(session_id, turns, options, skips):
        label = verdict(step.turn, options.include_implicit)
        if isinstance(label, SkipReason):
            skips.add(step.key, label)
        else:
            yield step, label


def kto_rows(
    session_id: str, turns: list[SessionTurn], options: Options, skips: Skips
) -> Iterator[Item]:
    """One row per turn with a verdict: TRL's unpaired preference format, conversational."""
    for step, label in _judged(session_id, turns, options, skips):
        prompt = list(step.before)
        row: KtoRow = {"prompt": prompt, "completion": [step.completion], "label": label}
        key = prompt_hash(prompt)
        meta = {**metadata(session_id, step.turn), "prompt_sha256": key}
        yield Item(key, row, key, meta, (step.key,))


class _Answer(NamedTuple):
    """A turn with a verdict, as dpo pairs it: its key, what its answer says (a digest of
    ``response_bytes``), and where its answer and metadata wait in the spool."""

    key: str
    response: bytes
    where: tuple[int, int]


@dataclass(slots=True)
class _Prompt:
    where: tuple[int, int]  # the prompt's messages in the spool
    chosen: list[_Answer] = field(default_factory=list)
    rejected: list[_Answer] = field(default_factory=list)


@dataclass(slots=True)
class _Spool:
    """Records written to a temporary file and read back by position: what dpo holds
    between reading a turn and pairing it, out of memory."""

    file: IO[bytes]
    size: int = 0

    def put(self, value: object) -> tuple[int, int]:
        data = orjson.dumps(value)
        self.file.write(data)
        at, self.size = self.size, self.size + len(data)
        return at, len(data)

    def get(self, where: tuple[int, int]) -> bytes:
        self.file.seek(where[0])
        data = self.file.read(where[1])
        self.file.seek(0, 2)
        return data


def dpo_rows(read: TurnLines, options: Options, skips: Skips) -> Iterator[Item]:
    """Pairs of an accepted and a rejected turn with one prompt, at most ``MAX_PAIRS`` a
    prompt, in the order the prompts were first met. A prompt's turns may be anywhere in the
    input, so each turn with a verdict is kept until the input is read: in memory as its
    key, digests and a position; its prompt (once a prompt), answer and metadata in a spool
    file, read back when its pair is written."""
    with tempfile.TemporaryFile(prefix="stream-app-dpo-") as file:
        yield from _pairs(read, options, skips, _Spool(file))


def _pairs(read: TurnLines, options: Options, skips: Skips, spool: _Spool) -> Iterator[Item]:
    prompts: dict[str, _Prompt] = {}
    for session_id, turns in sessions(read, skips):
        for step, label in _judged(session_id, turns, options, skips):
            key = prompt_hash(step.before)
            entry = prompts.get(key)
            if entry is None:
                entry = prompts[key] = _Prompt(spool.put(step.before))
            side = entry.chosen if label else entry.rejected
            answer = [step.completion, metadata(session_id, step.turn)]
            response = hashlib.sha256(response_bytes(step.completion)).digest()
            side.append(_Answer(step.key, response, spool.put(answer)))
    profile = options.chosen_profile
    for key, entry in prompts.items():
        used: set[int] = set()  # the rejected answers in a pair
        paired: set[int] = set()  # the chosen ones
        for i, chosen in enumerate(entry.chosen):
            if len(used) >= MAX_PAIRS:
                break
            partner = next(
                (
                    j
                    for j, rejected in enumerate(entry.rejected)
                    if j not in used and rejected.response != chosen.response
                ),
                None,
            )
            if partner is None:
                continue
            used.add(partner)
            paired.add(i)
            rejected = entry.rejected[partner]
            prompt = cast(list[ChatMessage], orjson.loads(spool.get(entry.where)))
            chosen_message, chosen_meta = orjson.loads(spool.get(chosen.where))
            rejected_message, rejected_meta = orjson.loads(spool.get(rejected.where))
            meta = {"prompt_sha256": key, "chosen": chosen_meta, "rejected": rejected_meta}
            row = pair_row(prompt, chosen_message, rejected_message, profile)
            yield Item(key, row, key, meta, (chosen.key, rejected.key))
        full = len(used) >= MAX_PAIRS
        for side, others, taken in (
            (entry.chosen, entry.rejected, paired),
            (entry.rejected, entry.chosen, used),
        ):
            for i, alone in enumerate(side):
                if i not in taken:
                    skips.add(alone.key, _why_unpaired(alone, others, full))


def _why_unpaired(answer: _Answer, others: list[_Answer], full: bool) -> SkipReason:
    """Why a turn with a verdict is in no pair: its counterparts (the turns of the other
    verdict with its prompt) all answered as it did, else its prompt has its pairs, else
    there is none or each that answered otherwise is in another pair."""
    if others and all(other.response == answer.response for other in others):
        return SkipReason.IDENTICAL_RESPONSES
    if full:
        return SkipReason.PAIR_LIMIT
    return SkipReason.UNPAIRED

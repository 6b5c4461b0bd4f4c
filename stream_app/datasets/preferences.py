"""Preference rows from the verdicts: kto (one row per turn) and dpo (accepted and rejected
pairs of one prompt)."""

from __future__ import annotations

import hashlib
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
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
from stream_app.datasets.scratch import blob_text, scratch_database, text_blob
from stream_app.datasets.skips import SkipReason, Skips
from stream_app.datasets.turn_lines import SessionTurn, TurnLines, sessions
from stream_app.datasets.verdicts import metadata, verdict

MAX_PAIRS = 3  # dpo: pairs written per prompt


def _judged(
    session_id: str, turns: Iterable[SessionTurn], options: Options, skips: Skips
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
    session_id: str, turns: Iterable[SessionTurn], options: Options, skips: Skips
) -> Iterator[Item]:
    """One row per turn with a verdict: TRL's unpaired preference format, conversational."""
    for step, label in _judged(session_id, turns, options, skips):
        prompt = list(step.before)
        row: KtoRow = {"prompt": prompt, "completion": [step.completion], "label": label}
        key = prompt_hash(prompt)
        meta = {**metadata(session_id, step.turn), "prompt_sha256": key}
        yield Item(key, row, key, meta, (step.key,))


_SCHEMA = """
CREATE TABLE prompt (
    id INTEGER PRIMARY KEY,  -- the order the prompts were first met
    hash TEXT NOT NULL UNIQUE,  -- prompt_hash
    at INTEGER NOT NULL,  -- its messages in the spool
    length INTEGER NOT NULL
);
CREATE TABLE answer (
    id INTEGER PRIMARY KEY,  -- input order
    prompt INTEGER NOT NULL,  -- prompt.id
    accepted INTEGER NOT NULL,  -- 1: chosen, 0: rejected
    response BLOB NOT NULL,  -- SHA-256 of response_bytes: what the answer says
    key BLOB NOT NULL,  -- the turn key, UTF-8 (a lone surrogate passed)
    at INTEGER NOT NULL,  -- its answer and metadata in the spool
    length INTEGER NOT NULL
);
-- A side of a prompt in input order (the rowid closes the index).
CREATE INDEX answer_by_side ON answer (prompt, accepted);
"""
_NEXT_CHOSEN = (
    "SELECT id, at, length, key, response FROM answer"
    " WHERE prompt = ? AND accepted = 1 AND id > ? AND response IS NOT ? ORDER BY id LIMIT 1"
)
_PARTNER = (
    "SELECT id, at, length, key FROM answer WHERE prompt = ? AND accepted = 0"
    f" AND id NOT IN ({', '.join('?' * MAX_PAIRS)}) AND response != ? ORDER BY id LIMIT 1"
)
_SIDES = (
    "SELECT accepted, COUNT(*), MIN(response), MAX(response) FROM answer WHERE prompt = ?"
    " GROUP BY accepted"
)
_ANY_LEFT = (
    "SELECT 1 FROM answer WHERE prompt = ? AND accepted = 0"
    f" AND id NOT IN ({', '.join('?' * MAX_PAIRS)}) LIMIT 1"
)


class _Side(NamedTuple):
    """One verdict's answers to a prompt: how many, and what they all say when they say one
    thing (None: more than one)."""

    answers: int
    uniform: bytes | None


_NONE = _Side(0, None)


class _Answer(NamedTuple):
    """A turn with a verdict as dpo finds it again: its row, where its answer and metadata
    are in the spool, and its key (UTF-8)."""

    id: int
    at: int
    length: int
    key: bytes


@dataclass(slots=True)
class _Spool:
    """Records written to a temporary file and read back by position: the prompts' messages
    and the answers (with their metadata) dpo holds between reading a turn and pairing it,
    out of memory and out of the database's rows (which stay small to scan)."""

    file: IO[bytes]
    size: int = 0

    def put(self, value: object) -> tuple[int, int]:
        data = orjson.dumps(value)
        self.file.write(data)
        at, self.size = self.size, self.size + len(data)
        return at, len(data)

    def get(self, at: int, length: int) -> bytes:
        self.file.seek(at)
        data = self.file.read(length)
        self.file.seek(0, 2)
        return data


def dpo_rows(read: TurnLines, options: Options, skips: Skips) -> Iterator[Item]:
    """Pairs of an accepted and a rejected turn with one prompt, at most ``MAX_PAIRS`` a
    prompt, in the order the prompts were first met. A prompt's turns may be anywhere in the
    input, so each turn with a verdict is kept until the input is read, on disk: its key,
    prompt and a digest of its answer in a scratch database (``scratch.py``), its prompt's
    messages (once a prompt), answer and metadata in a spool file, read back when its pair
    is written. Python holds one turn and one prompt's pairs at a time, whatever the number
    of prompts or of answers a prompt has."""
    db = scratch_database(_SCHEMA)
    try:
        with tempfile.TemporaryFile(prefix="stream-app-dpo-") as file:
            spool = _Spool(file)
            _keep(read, options, skips, db, spool)
            yield from _pairs(db, spool, options, skips)
    finally:
        db.close()


def _keep(
    read: TurnLines, options: Options, skips: Skips, db: sqlite3.Connection, spool: _Spool
) -> None:
    """Every turn with a verdict, kept in ``db`` and ``spool``."""
    for session_id, turns in sessions(read, skips):
        for step, label in _judged(session_id, turns, options, skips):
            key = prompt_hash(step.before)
            found = db.execute("SELECT id FROM prompt WHERE hash = ?", (key,)).fetchone()
            if found is not None:
                prompt_id = found[0]
            else:
                added = db.execute(
                    "INSERT INTO prompt (hash, at, length) VALUES (?, ?, ?)",
                    (key, *spool.put(step.before)),
                )
                prompt_id = added.lastrowid
            answer = [step.completion, metadata(session_id, step.turn)]
            response = hashlib.sha256(response_bytes(step.completion)).digest()
            db.execute(
                "INSERT INTO answer (prompt, accepted, response, key, at, length)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (prompt_id, label, response, text_blob(step.key), *spool.put(answer)),
            )


def _pairs(db: sqlite3.Connection, spool: _Spool, options: Options, skips: Skips) -> Iterator[Item]:
    """Each prompt's pairs, prompts in the order first met, then its turns in no pair."""
    profile = options.chosen_profile
    prompts = db.execute("SELECT id, hash, at, length FROM prompt ORDER BY id")
    for prompt_id, key, at, length in prompts:
        sides = {
            accepted: _Side(n, lo if lo == hi else None)
            for accepted, n, lo, hi in db.execute(_SIDES, (prompt_id,))
        }
        paired: tuple[set[int], set[int]] = (set(), set())  # ids in a pair: rejected, chosen
        for chosen, rejected in _pairing(db, prompt_id, sides.get(1, _NONE), sides.get(0, _NONE)):
            paired[1].add(chosen.id)
            paired[0].add(rejected.id)
            prompt = cast(list[ChatMessage], orjson.loads(spool.get(at, length)))
            chosen_message, chosen_meta = orjson.loads(spool.get(chosen.at, chosen.length))
            rejected_message, rejected_meta = orjson.loads(spool.get(rejected.at, rejected.length))
            meta = {"prompt_sha256": key, "chosen": chosen_meta, "rejected": rejected_meta}
            row = pair_row(prompt, chosen_message, rejected_message, profile)
            yield Item(key, row, key, meta, (blob_text(chosen.key), blob_text(rejected.key)))
        full = len(paired[0]) >= MAX_PAIRS
        for accepted in (1, 0):
            taken, others = paired[accepted], sides.get(1 - accepted, _NONE).uniform
            if sides.get(accepted, _NONE).answers == len(taken):
                continue  # every one in a pair (or none)
            alone = db.execute(
                "SELECT id, response, key FROM answer WHERE prompt = ? AND accepted = ?"
                " ORDER BY id",
                (prompt_id, accepted),
            )
            for answer_id, response, turn in alone:
                if answer_id not in taken:
                    skips.add(blob_text(turn), _why_unpaired(response, others, full))


def _pairing(
    db: sqlite3.Connection, prompt_id: int, chosen_side: _Side, rejected_side: _Side
) -> Iterator[tuple[_Answer, _Answer]]:
    """The pairs of a prompt: its chosen answers in order, each with the first rejected one
    not yet in a pair whose response differs, until ``MAX_PAIRS``. None when a side is empty
    or both say one same thing.

    A chosen answer that finds no partner shows every free rejected answer says what it
    does (``last``); as free ones only get fewer, a later chosen answer that says the same
    finds none either and is passed by in the query, so a prompt of any number of answers
    costs a few indexed scans, not one per answer."""
    if not (chosen_side.answers and rejected_side.answers):
        return
    if chosen_side.uniform is not None and chosen_side.uniform == rejected_side.uniform:
        return
    used: list[int] = []
    after, last = 0, None  # the chosen answer reached; what no free rejected one differs from
    while len(used) < MAX_PAIRS:
        row = db.execute(_NEXT_CHOSEN, (prompt_id, after, last)).fetchone()
        if row is None:
            return
        chosen, response = _Answer(*row[:4]), row[4]
        after = chosen.id
        free = (*used, *([0] * (MAX_PAIRS - len(used))))  # ids start at 1
        partner = db.execute(_PARTNER, (prompt_id, *free, response)).fetchone()
        if partner is None:
            if db.execute(_ANY_LEFT, (prompt_id, *free)).fetchone() is None:
                return  # every rejected answer is in a pair: no later chosen one pairs
            last = response
            continue
        used.append(partner[0])
        yield chosen, _Answer(*partner)


def _why_unpaired(response: bytes, others: bytes | None, full: bool) -> SkipReason:
    """Why a turn with a verdict is in no pair: its counterparts (the turns of the other
    verdict with its prompt, ``others`` what they all say when they say one thing) all
    answered as it did, else its prompt has its pairs, else there is none or each that
    answered otherwise is in another pair."""
    if others is not None and others == response:
        return SkipReason.IDENTICAL_RESPONSES
    if full:
        return SkipReason.PAIR_LIMIT
    return SkipReason.UNPAIRED

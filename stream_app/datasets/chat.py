"""Chat examples (SFT): each assistant message a training target once."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator

import orjson

from stream_app.datasets.conversation import conversation, prompt_hash
from stream_app.datasets.options import Options
from stream_app.datasets.profiles import profiled, tools_of
from stream_app.datasets.record_types import ChatExample, ChatMessage, ExampleMetadata, Item
from stream_app.datasets.scratch import scratch_database
from stream_app.datasets.skips import SkipReason, Skips
from stream_app.datasets.turn_lines import SessionTurn
from stream_app.datasets.verdicts import accepted, metadata


class WrittenExamples:
    """The examples written so far, as digests on disk (any number of them): a session
    forked from another, or resumed, sends the other's turns again, and the same history
    with the same answer is one example."""

    def __init__(self) -> None:
        self.db = scratch_database("CREATE TABLE example (digest BLOB PRIMARY KEY) WITHOUT ROWID;")

    def first(self, *parts: str | list[ChatMessage] | ChatMessage) -> bool:
        """Whether the example made of ``parts`` is met for the first time (now written)."""
        digest = hashlib.sha256(orjson.dumps(parts, option=orjson.OPT_SORT_KEYS)).digest()
        added = self.db.execute("INSERT OR IGNORE INTO example VALUES (?)", (digest,))
        return added.rowcount == 1


def chat_examples(
    session_id: str,
    turns: Iterable[SessionTurn],
    options: Options,
    skips: Skips,
    written: WrittenExamples,
) -> Iterator[Item]:
    """The session's chat examples, each assistant message a target once.

    OpenAI: one example per turn, its own message ``weight: 1`` and every earlier assistant
    message ``weight: 0``; an example ``written`` before, from another session, is skipped
    ``duplicate_example``. TRL, whose loss covers every assistant message of a row: one row
    per session, its messages up to its last turn (with ``--only-accepted``, up to the last
    turn before the first one not accepted: the later ones are skipped ``not_accepted``); a
    row equal to one written before is skipped, but a row that shares only its first turns
    with another (a fork) is written whole: TRL has no weight to leave them out.
    """
    profile = options.chosen_profile
    if profile == "openai":
        for step in conversation(session_id, turns, options, skips):
            if options.only_accepted and not accepted(step.turn):
                skips.add(step.key, SkipReason.NOT_ACCEPTED)
                continue
            prompt = prompt_hash(step.before)
            if not written.first(prompt, step.completion):
                skips.add(step.key, SkipReason.DUPLICATE_EXAMPLE)
                continue
            messages = [profiled(m, profile, 0) for m in step.before]
            messages.append(profiled(step.completion, profile, 1))
            example: ChatExample = {"messages": messages}
            if tools := tools_of(messages):
                example["tools"] = tools
            meta = metadata(session_id, step.turn)
            yield Item(session_id, example, prompt, dict(meta), (step.key,))
        return
    kept: list[ExampleMetadata] = []
    keys: list[str] = []
    last: list[ChatMessage] = []
    first_prompt: str | None = None
    stopped = False
    for step in conversation(session_id, turns, options, skips):
        if stopped or (options.only_accepted and not accepted(step.turn)):
            skips.add(step.key, SkipReason.NOT_ACCEPTED)
            stopped = True
            continue
        if first_prompt is None:
            first_prompt = prompt_hash(step.before)
        last = [*step.before, step.completion]
        kept.append(metadata(session_id, step.turn))
        keys.append(step.key)
    if kept and not written.first(prompt_hash(last)):
        for key in keys:
            skips.add(key, SkipReason.DUPLICATE_EXAMPLE)
    elif kept:
        row: ChatExample = {"messages": last, "tools": tools_of(last)}
        session_meta = {"session_id": session_id, "turns": kept}
        yield Item(session_id, row, first_prompt, session_meta, tuple(keys))

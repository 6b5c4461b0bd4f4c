"""Datasets (SPEC §9): Turn records as what trainers load, as pure functions.

The input is the latest revision of every turn, in the order the turns were first emitted: a
TURNS or FINAL file (``stream-app replay``'s), or the final topic read by ``stream-app
export``. Five formats come out of it, one record at a time with the key it is split by:

- ``turns``: the ``{"key", "value"}`` lines themselves;
- ``chat``: supervised examples in which each assistant message is a training target once
  (OpenAI: one example per turn, earlier assistant messages ``weight: 0``; TRL: one row per
  session, as TRL's loss covers every assistant message of a row);
- ``trajectories``: one line per session, ``{"session_id", "org_id", "turns"}``;
- ``kto``: one row per turn with a verdict, TRL's unpaired preference rows;
- ``dpo``: an accepted and a rejected turn of one prompt, TRL's (or OpenAI's) preference rows.

A turn the format cannot write faithfully is skipped with a reason of the format's closed
list (:data:`SKIPS`) and counted, never written wrong. The history rule: a session's
messages, in the order of its turns, must form a conversation the chat format can hold. Every
tool call of an assistant message is answered by a tool message before the next message of
another role, and every tool message answers such a call. A tool result whose call no earlier
message of the session makes is the trace of a missing earlier turn; a missing turn that no
tool loop crosses cannot be noticed from the turns alone.
"""

from __future__ import annotations

from collections.abc import Iterator

from stream_app.datasets.chat import WrittenExamples, chat_examples
from stream_app.datasets.content import redacted
from stream_app.datasets.options import Options
from stream_app.datasets.preferences import dpo_rows, kto_rows
from stream_app.datasets.record_types import Item
from stream_app.datasets.skips import SkipReason, Skips
from stream_app.datasets.trajectories import trajectory
from stream_app.datasets.turn_lines import TurnLines, sessions


def turns_lines(read: TurnLines, options: Options, skips: Skips) -> Iterator[Item]:
    """The turn lines as they are (their content redacted unless ``keep_credentials``), by
    session (in the order of its first turn), then in first-emission order."""
    for session_id, turns in sessions(read, skips):
        for key, turn in turns:
            if isinstance(turn, SkipReason):
                skips.add(key, turn)
                continue
            value = turn if options.keep_credentials else redacted(turn, skips)
            yield Item(session_id, {"key": key, "value": value}, None, None, (key,))


def records(read: TurnLines, options: Options, skips: Skips) -> Iterator[Item]:
    """Every record of ``options.format``, with what it is split by, in order."""
    if options.format == "turns":
        yield from turns_lines(read, options, skips)
        return
    if options.format == "dpo":
        yield from dpo_rows(read, options, skips)
        return
    if options.format == "chat":
        written = WrittenExamples()
        for session_id, turns in sessions(read, skips):
            yield from chat_examples(session_id, turns, options, skips, written)
        return
    for session_id, turns in sessions(read, skips):
        if options.format == "kto":
            yield from kto_rows(session_id, turns, options, skips)
        elif (line := trajectory(session_id, turns, options, skips)) is not None:
            keys = tuple(turns.turn_keys())
            yield Item(session_id, line, None, None, keys)

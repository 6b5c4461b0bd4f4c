"""Embedded replay (SPEC §7): the core over a JSON-lines file, with no broker.

Each input line is ``{"topic": <an input kind's name>, "key": str|null, "value": V}``
(``ingest/lines.py``); a string V is the raw record value, anything else is the value
itself. Lines are one partition whose offsets are their 0-based line numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from operator import itemgetter
from pathlib import Path
from typing import IO

import orjson

from stream_app.cli import replay_telemetry
from stream_app.cli.arguments import Commands
from stream_app.config import Settings, load_settings
from stream_app.console.wording import counted, named, unclosed_warning
from stream_app.core.counts import Count
from stream_app.core.dead_letter import dead_letter, rejected
from stream_app.core.inputs import INPUTS, names
from stream_app.core.records import Origin, Outputs, Unread, turns_line
from stream_app.ingest.lines import read_line, telemetry_line
from stream_app.models.dead_letter import Reason
from stream_app.runtime import allocator
from stream_app.runtime.allocator import tune_gc
from stream_app.state.base import SessionStore
from stream_app.state.memory import MemorySessions
from stream_app.worker.pipeline import Pipeline

REPLAY_INPUT_TOPIC = "replay-input"  # source_topic of a line that is not a record at all
FREEZE_EVERY = 1_000  # records between two freezes of what the replay holds (runtime/allocator.py)


RECORDS_OTHER = "records:other"  # lines that are no record (dead-lettered as they are)


class Ledger:
    """Where every record read went: the equation of replay's summary (issue 49 item 4),

        read = in turns + duplicates + replaced + in dead letters + dropped + waiting

    - in turns: the messages and decisions of every turn's latest revision (a turn is its
      key, so a revision replaces what the one before held);
    - duplicates: the core's counted duplicates (every ``duplicate:*`` count, and records
      read again, which replay never has);
    - replaced: copies of a pending message that a later copy with its identity replaced
      in place (a message published streaming, then in full: ``pending_replaced``);
    - in dead letters: one record a dead letter, and the records a turn too large to emit
      held besides the one that finished it (its ``turn_too_large`` dead letter carries them:
      ``held_by_too_large``);
    - dropped: pending messages dropped with their session, at its expiry or, with
      ``--final-out``, at the end of the input (``end_sessions``);
    - waiting: without ``--final-out``, pending messages and decisions waiting for a turn
      that the state still holds at the end of the input.

    Every term but the first is the core's counts; the first is the turns' latest revisions.
    """

    def __init__(self) -> None:
        self.turns: dict[tuple[str, str], int] = {}  # turn -> records its latest revision holds

    def add(self, out: Outputs) -> None:
        """What one record's step emitted: a turn's latest revision holds its records."""
        for revision in out.turns:
            turn = revision.turn
            held = len(turn["new_messages"]) + len(turn["decisions"])
            self.turns[(revision.session_id, turn["inference_call_id"])] = held

    def count(self, totals: Counter[str]) -> None:
        """Adds the equation's terms to ``totals`` (``waiting:*`` are counted at the end)."""
        totals["records_read"] = (
            sum(totals[kind.read] for kind in INPUTS.values())
            + totals[RECORDS_OTHER]
            + replay_telemetry.records_read(totals)
        )
        totals["in_turns"] = sum(self.turns.values())
        totals["duplicates"] = totals[Count.REPROCESSED] + sum(
            n for k, n in totals.items() if k.startswith("duplicate:")
        )
        totals["replaced_copies"] = totals[Count.PENDING_REPLACED]
        letters = sum(n for k, n in totals.items() if k.startswith("dead_letter:"))
        totals["in_dead_letters"] = letters + totals[Count.HELD_BY_TOO_LARGE]
        totals["dropped_messages"] = totals[Count.PENDING_MESSAGES_EXPIRED]


def records(
    lines: Iterable[bytes], settings: Settings, pipeline: Pipeline, ledger: Ledger | None = None
) -> Iterator[Outputs]:
    telemetry = replay_telemetry.TelemetryLines(pipeline)
    for offset, line in enumerate(lines):
        if not line or line.isspace():
            continue
        if (tele := telemetry_line(line, offset, settings)) is not None:
            yield from telemetry.outputs(tele, ledger.add if ledger is not None else _nothing)
            continue
        read = read_line(line, offset, settings)
        if isinstance(read, str):
            bad = Unread(REPLAY_INPUT_TOPIC, 0, offset, None, line.rstrip(b"\n"))
            reason = Reason.INVALID_JSON if read.startswith("line is not") else Reason.SCHEMA
            out = rejected(Origin.of(bad), reason, read, pipeline.clock())
            out.counts[RECORDS_OTHER] += 1  # type: ignore[index]  # replay's own count
            yield out
            continue
        record, value = read
        # A string is the raw record, still to parse; anything else was parsed with the line.
        parsed = None if isinstance(value, str) else value
        out = pipeline.process(record, parsed)
        if ledger is not None:
            ledger.add(out)
        out.counts[INPUTS[record.kind].read] += 1  # type: ignore[index]  # replay's own count
        yield out


def _nothing(out: Outputs) -> None:
    return None


def end_sessions(pipeline: Pipeline) -> Outputs:
    """``--final-out``: the end of the input is the end of every session, as its expiry is
    for the worker (``core/expiry.py``): every open turn goes final (``expired``), every
    decision still waiting for a turn is an ``orphaned_decision`` dead letter, and the
    pending messages that no finishing message closed are dropped and counted. The sessions
    are left in the store as they were otherwise, so that ``unfinished`` still names them."""
    out = pipeline.finish()
    now = pipeline.clock()
    orphaned = Count.dead_letter(Reason.ORPHANED_DECISION)
    for session_id in pipeline.store.session_ids():
        state = pipeline.store.get(session_id)
        if state is None:
            continue
        for waiting in state.waiting:
            error = (
                f"no turn of session {session_id!r} reached call_id {waiting.call_id!r} "
                "before the end of the input (replay --final-out ends every session there)"
            )
            out.dead_letters.append(
                dead_letter(waiting.origin, Reason.ORPHANED_DECISION, error, now)
            )
            out.counts[orphaned] += 1
        out.counts[Count.PENDING_MESSAGES_EXPIRED] += len(state.pending_messages)
    return out


class FinalLines:
    """``--final-out``: one TURNS line a turn, its final record, in the order the turns were
    first emitted (SPEC §8). A turn that goes final during the replay (a session limit closed
    it, or its window passed on the replay's clock) is held until the end; the rest are final
    at the end of the input, where nothing can revise them any more."""

    def __init__(self) -> None:
        self.first: dict[bytes, int] = {}  # open turn's key -> its place in emission order
        self.emitted = 0
        self.final: list[tuple[int, bytes]] = []

    def add(self, out: Outputs) -> None:
        for revision in out.turns:
            if revision.first:
                self.first[revision.key_bytes] = self.emitted
                self.emitted += 1
        for final in out.finals:
            place = self.first.pop(final.key_bytes, self.emitted)
            self.final.append((place, turns_line(final.key_bytes.decode(), final.value)))

    def write(self, out: IO[bytes]) -> int:
        self.final.sort(key=itemgetter(0))
        for _, line in self.final:
            out.write(line)
        return len(self.final)


def replay(
    lines: Iterable[bytes],
    settings: Settings,
    turns: IO[bytes],
    dlq: IO[bytes],
    pipeline: Pipeline | None = None,
    final: IO[bytes] | None = None,
) -> Counter[str]:
    """Replays ``lines`` and writes every emission; returns the counts for the summary.
    ``final``: where every turn's final record goes (``FinalLines``), at the end."""
    pipeline = pipeline or Pipeline(settings.policy(), MemorySessions())
    totals: Counter[str] = Counter()
    finals = None if final is None else FinalLines()
    ledger = Ledger()

    def written(out: Outputs) -> None:
        for revision in out.turns:
            turns.write(turns_line(revision.key, revision.value))
        if finals is not None:
            finals.add(out)
        for letter in out.dead_letters:
            dlq.write(orjson.dumps(letter, option=orjson.OPT_APPEND_NEWLINE))
        for count, times in out.counts.items():  # Counter.update's checks cost more
            totals[count] += times

    for n, out in enumerate(records(lines, settings, pipeline, ledger), 1):
        if n % FREEZE_EVERY == 0:
            allocator.freeze_survivors()  # the state built so far: the collector walks it no more
        written(out)
    if finals is not None and final is not None:
        written(end_sessions(pipeline))
        totals["turns_final"] = finals.write(final)
    else:  # the sessions stay open: what they hold still waits, and is counted so
        for session_id in pipeline.store.session_ids():
            state = pipeline.store.get(session_id)
            if state is not None:
                totals["waiting:messages"] += len(state.pending_messages)
                totals["waiting:decisions"] += len(state.waiting_decisions)
    ledger.count(totals)
    totals["sessions_in_state"] = len(pipeline.store)
    return totals


def unfinished(store: SessionStore) -> list[str]:
    """Warnings for what the input leaves waiting in state, which no output shows: sessions
    whose last messages no finishing message closed, and decisions whose turn never came."""
    unclosed: list[str] = []
    waiting: list[str] = []
    for session_id in store.session_ids():
        state = store.get(session_id)
        if state is None:
            continue
        if state.pending_messages:
            unclosed.append(session_id)
        if state.waiting_decisions:
            waiting.append(session_id)
    warnings = [unclosed_warning(sorted(unclosed))] if unclosed else []
    if waiting:
        warnings.append(
            f"{counted(len(waiting), 'session')} {'holds' if len(waiting) == 1 else 'hold'} "
            "decisions waiting for a turn that "
            f"has not come: {named(sorted(waiting))}"
        )
    return warnings


def summary(counts: Counter[str]) -> str:
    def by(prefix: str) -> dict[str, int]:
        return {k[len(prefix) :]: v for k, v in sorted(counts.items()) if k.startswith(prefix)}

    letters = by("dead_letter:")
    read = [counted(counts[kind.read], kind.noun) for kind in INPUTS.values()]
    if counts[RECORDS_OTHER]:
        read.append(counted(counts[RECORDS_OTHER], "other line"))
    parts: list[str] = [
        ", ".join(read) + " read",
        f"{counted(counts['turns_emitted'], 'turn')} emitted, "
        f"{counted(counts['turn_revisions'], 'revision')}"
        + (f", {counts['turns_final']} final" if "turns_final" in counts else ""),
        f"{counted(counts['duplicate:message'], 'duplicate message')}, "
        f"{counted(counts['duplicate:decision'], 'duplicate decision')}",
        counted(sum(letters.values()), "dead letter")
        + (" (" + ", ".join(f"{k} {v}" for k, v in letters.items()) + ")" if letters else ""),
        f"{counted(counts['parts_skipped'], 'part')} skipped, "
        f"{counted(counts['malformed_tool_arguments'], 'tool call')} with malformed arguments",
        equation(counts),
        f"{counted(counts['sessions_in_state'], 'session')} in state",
    ]
    if (telemetry := replay_telemetry.clause(counts)) is not None:
        parts.insert(1, telemetry)
    return "stream-app replay: " + "; ".join(parts)


def accounted(counts: Counter[str]) -> int:
    """The records the equation's right-hand side accounts for (``Ledger``)."""
    return (
        counts["in_turns"]
        + counts["duplicates"]
        + counts["replaced_copies"]
        + counts["in_dead_letters"]
        + counts["dropped_messages"]
        + counts["waiting:messages"]
        + counts["waiting:decisions"]
    )


def equation(counts: Counter[str]) -> str:
    """Where every record read went (``Ledger``): ``N records read = ... in turns + ...``;
    without ``--final-out`` (sessions left open) what still waits in state is a term."""
    read = counts["records_read"]
    terms = [
        f"{counts['in_turns']} in turns",
        counted(counts["duplicates"], "duplicate"),
        f"{counts['replaced_copies']} replaced by a later copy",
        f"{counts['in_dead_letters']} in dead letters",
        f"{counts['dropped_messages']} dropped",
    ]
    if "turns_final" not in counts:
        messages, decisions = counts["waiting:messages"], counts["waiting:decisions"]
        terms.append(
            f"{messages + decisions} waiting ({counted(messages, 'message')}, "
            f"{counted(decisions, 'decision')})"
        )
    missing = read - accounted(counts)
    said = f"{counted(read, 'record')} read = " + " + ".join(terms)
    if missing:  # a record in no output and no count: a bug, said rather than hidden
        said = said.replace(" = ", " != ", 1) + f" ({missing} unaccounted for)"
    return said


def register(commands: Commands) -> None:
    """The ``replay`` subcommand."""
    replay = commands.add_parser(
        "replay",
        help="run the pipeline over a JSON-lines file, with no broker",
        description="Run the pipeline over a replay-format file (one "
        f'{{"topic": {names()}, "key": ..., "value": ...}} object per line), with '
        "no broker: turn revisions go to --out, dead letters to --dlq, and a summary of the "
        "counts to stderr. Exit status 0 when the input was read (dead letters are not "
        "failures); 2, with one line, when a file cannot be read or written.",
    )
    replay.add_argument("input", help="input records, one JSON object per line")
    replay.add_argument("--out", required=True, help="where to write turn revisions")
    replay.add_argument("--dlq", required=True, help="where to write dead letters")
    replay.add_argument(
        "--final-out",
        help="where to write each turn once, its latest revision, at the end of the input "
        "(TURNS lines, in the order the turns were first emitted)",
    )
    replay.add_argument("--org-id", help="the deployment's org id (default: STREAM_APP_ORG_ID)")
    replay.set_defaults(run=command)


def command(args: argparse.Namespace) -> int:
    settings = load_settings()
    tune_gc()
    if args.org_id is not None:
        settings = settings.model_copy(update={"org_id": args.org_id})
    try:
        source = Path(args.input).open("rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        print(f"stream-app replay: cannot read {args.input}: {exc.strerror}", file=sys.stderr)
        return 2
    pipeline = Pipeline(settings.policy(), MemorySessions())
    try:
        with contextlib.ExitStack() as files:
            files.enter_context(source)
            turns = files.enter_context(open(args.out, "wb"))
            dlq = files.enter_context(open(args.dlq, "wb"))
            final = None
            if args.final_out is not None:
                final = files.enter_context(open(args.final_out, "wb"))
            if sys.stderr.isatty():
                from stream_app.cli.replay_view import replay_with_progress

                replay_with_progress(source, settings, turns, dlq, pipeline, final)
            else:
                counts = replay(source, settings, turns, dlq, pipeline, final)
                print(summary(counts), file=sys.stderr)
    except OSError as exc:
        print(f"stream-app replay: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    for warning in unfinished(pipeline.store):
        print(f"stream-app replay: warning: {warning}", file=sys.stderr)
    return 0

"""Telemetry lines in ``stream-app replay`` (SPEC §10): ``{"topic": "telemetry", "value":
<OTLP JSON>}``, a captured export of the agents' OpenTelemetry logs, takes the worker's path
with no broker.

The line is the telemetry topic's record (``ingest/telemetry.step``): its untranslatable log
records and a value that is no OTLP request are dead letters carrying the line's offset;
each decision it makes is then read as a decision record, as the worker sends it to the
decisions topic. Those records are numbered in the order they are made, on partition 1 of the
telemetry topic (the lines are partition 0), so that the core, which applies a source record
once by offset, never takes one of them for another.

What the equation of replay's summary counts (``replay.Ledger``): each decision made is a
decision read; each telemetry dead letter a record read; ignored log records are no record
of it, and the summary's telemetry clause says how many there were.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from itertools import count

from stream_app.console.wording import counted
from stream_app.core.inputs import DECISIONS
from stream_app.core.records import Outputs, SourceRecord
from stream_app.ingest import telemetry
from stream_app.ingest.lines import TELEMETRY
from stream_app.worker.pipeline import Pipeline

DECISIONS_PARTITION = 1  # where the decisions a replay's telemetry lines made are numbered
LINES = "telemetry:lines"
LOG_RECORDS = "telemetry:log_records"
TRANSLATED = "telemetry:translated"
IGNORED = "telemetry:ignored"
UNTRANSLATABLE = "telemetry:untranslatable"
NOT_OTLP = "telemetry:invalid"


class TelemetryLines:
    """The telemetry lines of one replay, and the numbering of the decisions they make."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self._numbers = count()

    def outputs(self, record: SourceRecord, add: Callable[[Outputs], None]) -> Iterator[Outputs]:
        """The outputs of one telemetry line's record: its dead letters, then each decision's
        step; ``add`` is told each decision's step (the ledger)."""
        pipeline = self.pipeline
        done = telemetry.step(record, pipeline.policy, pipeline.clock())
        translation, out = done.translation, done.out
        counts: Counter[str] = out.counts  # type: ignore[assignment]  # replay's own counts
        counts[LINES] += 1
        counts[LOG_RECORDS] += len(translation.outcomes)
        counts[TRANSLATED] += sum(translation.translated.values())
        counts[IGNORED] += sum(translation.ignored.values())
        counts[UNTRANSLATABLE] += sum(translation.untranslatable.values())
        counts[NOT_OTLP] += len(out.dead_letters) - sum(translation.untranslatable.values())
        yield out
        for decision in translation.decisions:
            source = SourceRecord(
                DECISIONS.name,
                record.topic,
                DECISIONS_PARTITION,
                next(self._numbers),
                decision.session_id.encode(),
                decision.value,
            )
            step = pipeline.process(source)
            add(step)
            step.counts[DECISIONS.read] += 1  # type: ignore[index]  # replay's own count
            yield step


def records_read(counts: Counter[str]) -> int:
    """The records of the equation that telemetry lines make besides the decisions: their
    dead letters."""
    return counts[UNTRANSLATABLE] + counts[NOT_OTLP]


def clause(counts: Counter[str]) -> str | None:
    """The summary's telemetry clause, when there were telemetry lines."""
    if not counts[LINES]:
        return None
    said = (
        f"{counts[LINES]} {TELEMETRY} line{'s' if counts[LINES] != 1 else ''}: "
        f"{counted(counts[LOG_RECORDS], 'log record')} = {counts[TRANSLATED]} translated + "
        f"{counts[IGNORED]} ignored + {counts[UNTRANSLATABLE]} untranslatable"
    )
    if counts[NOT_OTLP]:
        said += f" ({counts[NOT_OTLP]} not OTLP)"
    return said

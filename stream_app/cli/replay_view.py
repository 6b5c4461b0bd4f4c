"""What ``stream-app replay`` shows on a terminal: a progress bar, then a table of counts."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from typing import IO

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn
from rich.table import Table

from stream_app.cli.replay import accounted, replay
from stream_app.config import Settings
from stream_app.core.inputs import INPUTS
from stream_app.worker.pipeline import Pipeline

ROWS = [
    *((kind.read, f"{kind.noun}s read") for kind in INPUTS.values()),
    ("turns_emitted", "turns emitted"),
    ("turn_revisions", "turn revisions (late decisions)"),
    ("duplicate:message", "duplicate messages"),
    ("duplicate:decision", "duplicate decisions"),
    ("parts_skipped", "content parts skipped"),
    ("malformed_tool_arguments", "malformed tool arguments"),
    ("sessions_in_state", "sessions in state"),
]
LEDGER = [
    ("records_read", "records read, of which"),
    ("in_turns", "  in turns (latest revisions)"),
    ("duplicates", "  duplicates"),
    ("replaced_copies", "  replaced by a later copy"),
    ("in_dead_letters", "  in dead letters"),
    ("dropped_messages", "  messages dropped"),
    ("waiting:messages", "  messages waiting (no --final-out)"),
    ("waiting:decisions", "  decisions waiting (no --final-out)"),
]


def summary_table(counts: Counter[str]) -> Table:
    table = Table(title="replay summary")
    table.add_column("what")
    table.add_column("count", justify="right")
    for key, label in ROWS:
        table.add_row(label, f"{counts[key]:,}")
    if "turns_final" in counts:
        table.add_row("final turns (--final-out)", f"{counts['turns_final']:,}")
    for key in sorted(k for k in counts if k.startswith("dead_letter:")):
        table.add_row(f"dead letters: {key.removeprefix('dead_letter:')}", f"{counts[key]:,}")
    # Where every record read went (``replay.Ledger``): the rows below add up to the first.
    table.add_section()
    ledger = [(k, label) for k, label in LEDGER if k in counts or "turns_final" not in counts]
    for key, label in ledger:
        table.add_row(label, f"{counts[key]:,}")
    if missing := counts["records_read"] - accounted(counts):
        table.add_row("[bold red]unaccounted for[/]", f"{missing:,}")
    return table


def replay_with_progress(
    source: IO[bytes],
    settings: Settings,
    turns: IO[bytes],
    dlq: IO[bytes],
    pipeline: Pipeline | None = None,
    final: IO[bytes] | None = None,
) -> Counter[str]:
    console = Console(stderr=True)
    size = os.fstat(source.fileno()).st_size
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("replaying", total=size)

        def lines() -> Iterator[bytes]:
            done = 0
            for n, line in enumerate(source, 1):
                done += len(line)
                if n % 1000 == 0:
                    bar.update(task, completed=done)
                yield line
            bar.update(task, completed=done)

        counts = replay(lines(), settings, turns, dlq, pipeline, final)
    console.print(summary_table(counts))
    return counts

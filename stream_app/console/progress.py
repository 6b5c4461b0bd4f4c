"""The progress bar of ``stream-app publish`` and ``export``: on a terminal only.

Lines said while the bar runs go through the bar's console, so they land above it instead of
tearing it; off a terminal (a pipe, a CI log) there is no bar and lines go to stderr as they
are.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text


class Bar(Protocol):
    def update(self, completed: int, total: int | None = None) -> None: ...

    def say(self, line: str) -> None: ...


class _Quiet:
    def update(self, completed: int, total: int | None = None) -> None:
        pass

    def say(self, line: str) -> None:
        print(line, file=sys.stderr, flush=True)


class _Shown:
    def __init__(self, bar: Progress, console: Console, description: str) -> None:
        self.bar, self.console = bar, console
        self.task = bar.add_task(description, total=None)

    def update(self, completed: int, total: int | None = None) -> None:
        if total is not None:
            self.bar.update(self.task, total=total)
        self.bar.update(self.task, completed=completed)

    def say(self, line: str) -> None:
        # Text, not a string: a file name or an error with brackets is not markup.
        self.console.print(Text(line), soft_wrap=True)


@contextmanager
def progress(description: str, *, in_bytes: bool) -> Iterator[Bar]:
    """A bar counting bytes (``in_bytes``) or records, shown when stderr is a terminal."""
    if not sys.stderr.isatty():
        yield _Quiet()
        return
    console = Console(stderr=True)
    count = DownloadColumn() if in_bytes else MofNCompleteColumn()
    columns = (TextColumn("{task.description}"), BarColumn(), count)
    with Progress(*columns, TimeRemainingColumn(), console=console, transient=True) as bar:
        yield _Shown(bar, console, description)

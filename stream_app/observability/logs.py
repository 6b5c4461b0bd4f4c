"""One line per event of interest: JSON for log shippers, ``key=value`` on a terminal."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

import orjson

from stream_app.models.timestamps import format_utc

_logger = logging.getLogger("stream_app.events")


class _EventFormatter(logging.Formatter):
    def __init__(self, as_json: bool) -> None:
        super().__init__()
        self.as_json = as_json

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, object] = getattr(record, "fields", {})
        if self.as_json:
            return orjson.dumps(
                {
                    "ts": format_utc(record.created),
                    "level": record.levelname.lower(),
                    "event": record.getMessage(),
                    **fields,
                },
                default=str,
            ).decode()
        pairs = " ".join(f"{k}={v}" for k, v in fields.items())
        return f"{format_utc(record.created)} {record.levelname:<7} {record.getMessage()} {pairs}"


def configure(stream: TextIO | None = None) -> None:
    """Send event lines to stderr (JSON unless it is a terminal), apart from library logs."""
    stream = stream or sys.__stderr__ or sys.stderr
    handler = logging.StreamHandler(stream)
    handler.setFormatter(_EventFormatter(as_json=not stream.isatty()))
    _logger.handlers[:] = [handler]
    _logger.setLevel(logging.INFO)
    _logger.propagate = False


def event(name: str, level: int = logging.INFO, **fields: object) -> None:
    if not _logger.handlers:
        configure()
    _logger.log(level, name, extra={"fields": fields})


def quiet_root_logger() -> None:
    """Faust's terminal spinner handler listens at DEBUG, which keeps the root logger at
    DEBUG: every library debug call then builds a record, a share of a busy worker's CPU
    for nothing. A service has no spinner to turn."""
    root = logging.getLogger()
    root.handlers[:] = [h for h in root.handlers if type(h).__name__ != "SpinnerHandler"]
    levels = [h.level for h in root.handlers if h.level]
    root.setLevel(min(levels) if levels else logging.INFO)


REPEAT_WINDOW = 30.0  # seconds in which a library's record of a kind is let through once
REPEATED_LOGGERS = ("aiokafka",)


class Repeats(logging.Filter):
    """Lets one WARNING-or-worse record of a kind (logger, level, message template) through
    per ``window`` seconds, and marks the next one let through with how many it held back
    (``suppressed``).

    With the brokers gone, aiokafka logs every failed connection, fetch, metadata and
    coordinator request of each of its clients: ~385 ERROR lines in 5 s, which bury the
    project's own line per attempt and cost a log pipeline for nothing. A filter on a
    handler sees the records of child loggers (``aiokafka.conn``), which one on the
    ``aiokafka`` logger itself does not. INFO records pass: they do not repeat like that,
    and a rebalance's ``(Re-)joining group`` must show every time.
    """

    MAX_KINDS = 1000  # kinds remembered; more means messages made per call, not templates

    def __init__(
        self,
        loggers: tuple[str, ...] = REPEATED_LOGGERS,
        window: float = REPEAT_WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.loggers, self.window, self.clock = loggers, window, clock
        self._kinds: dict[tuple[str, int, str], list[float]] = {}  # passed at, held back
        self._lock = threading.Lock()  # the consumer's thread logs too

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or not any(
            record.name == name or record.name.startswith(name + ".") for name in self.loggers
        ):
            return True
        kind = (record.name, record.levelno, str(record.msg))
        now = self.clock()
        with self._lock:
            seen = self._kinds.get(kind)
            if seen is not None and now - seen[0] < self.window:
                seen[1] += 1
                return False
            if len(self._kinds) >= self.MAX_KINDS:
                self._kinds.clear()
            self._kinds[kind] = [now, 0]
        if seen is not None and seen[1]:
            record.suppressed = int(seen[1])
        return True


class OneLineFormatter(logging.Formatter):
    """A library's record as one JSON line, its traceback in a field: a log shipper takes a
    line for a record, and Faust's format spreads a traceback, or a recovery's table of
    offsets, over dozens. On a terminal, a person reads the library's own format."""

    def __init__(self, as_json: bool, terminal: logging.Formatter | None = None) -> None:
        super().__init__()
        self.as_json = as_json
        self.terminal = terminal or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        suppressed: int = getattr(record, "suppressed", 0)
        if not self.as_json:
            text = self.terminal.format(record)
            return f"{text} ({suppressed} like it suppressed)" if suppressed else text
        doc: dict[str, str | int] = {
            "ts": format_utc(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if suppressed:
            doc["suppressed"] = suppressed
        if record.exc_info:
            doc["traceback"] = self.formatException(record.exc_info)
        elif record.exc_text:
            doc["traceback"] = record.exc_text
        if record.stack_info:
            doc["stack"] = self.formatStack(record.stack_info)
        return orjson.dumps(doc, default=str).decode()


def one_line_library_logs(root: logging.Logger) -> None:
    """Every handler of ``root`` (Faust's, once it has set them up) writes a record as one
    line and lets the clients' repeats through once per window."""
    repeats = Repeats()
    for handler in root.handlers:
        if type(handler).__name__ == "SpinnerHandler":
            continue
        stream = getattr(handler, "stream", None)
        on_terminal = bool(stream is not None and hasattr(stream, "isatty") and stream.isatty())
        handler.setFormatter(OneLineFormatter(not on_terminal, handler.formatter))
        handler.addFilter(repeats)
    logging.captureWarnings(True)  # a warning too is a record, not lines on stderr


def log_thread_exceptions() -> None:
    """A thread's uncaught exception as one record with its traceback. Python prints it to
    stderr, a line at a time; with Faust's redirection of stderr to its log, each write was a
    record (~68 for one traceback of the consumer's thread)."""

    def hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit or args.exc_value is None:
            return
        logging.getLogger("stream_app.threads").error(
            "uncaught exception in thread %s",
            args.thread.name if args.thread is not None else "?",
            exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
        )

    threading.excepthook = hook

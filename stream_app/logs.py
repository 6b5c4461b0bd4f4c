"""One line per event of interest: JSON for log shippers, ``key=value`` on a terminal."""

from __future__ import annotations

import logging
import sys
from typing import Any

import orjson

from stream_app.models.timestamps import format_utc

_logger = logging.getLogger("stream_app.events")


class _EventFormatter(logging.Formatter):
    def __init__(self, as_json: bool) -> None:
        super().__init__()
        self.as_json = as_json

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = getattr(record, "fields", {})
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


def configure(stream: Any = None) -> None:
    """Send event lines to stderr (JSON unless it is a terminal), apart from library logs."""
    stream = stream or sys.__stderr__
    handler = logging.StreamHandler(stream)
    handler.setFormatter(_EventFormatter(as_json=not stream.isatty()))
    _logger.handlers[:] = [handler]
    _logger.setLevel(logging.INFO)
    _logger.propagate = False


def event(name: str, level: int = logging.INFO, **fields: Any) -> None:
    if not _logger.handlers:
        configure()
    _logger.log(level, name, extra={"fields": fields})


def quiet_root_logger() -> None:
    """Faust's terminal spinner handler listens at DEBUG, which keeps the root logger at
    DEBUG: every library debug call then builds a record (~8 % of a busy worker's CPU,
    measured with py-spy). A service has no spinner to turn."""
    root = logging.getLogger()
    root.handlers[:] = [h for h in root.handlers if type(h).__name__ != "SpinnerHandler"]
    levels = [h.level for h in root.handlers if h.level]
    root.setLevel(min(levels) if levels else logging.INFO)

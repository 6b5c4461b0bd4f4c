"""RFC 3339 date-times, checked exactly as JSON Schema's ``date-time`` format checker does.

Decisions collapse on ``occurred_at`` as an instant, so two spellings of one moment must
compare equal; and a value accepted here must be accepted by the published schema (and
the reverse), so the rules mirror ``rfc3339-validator`` used by ``jsonschema``.
"""

from __future__ import annotations

import calendar
import functools
import math
import re
from datetime import UTC, datetime

_RFC3339 = re.compile(
    r"^(\d{4})-(0[1-9]|1[0-2])-(\d{2})T([01]\d|2[0-3]):([0-5]\d):([0-5]\d)(?:\.(\d+))?"
    r"(Z|([+-])([01]\d|2[0-3]):([0-5]\d))$",
    re.ASCII | re.IGNORECASE,  # "t" and "z" too, as RFC 3339 allows
)
_EPOCH_DAYS = datetime(1970, 1, 1).toordinal()
_DAYS = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


@functools.lru_cache(maxsize=4096)
def _match(value: str) -> re.Match[str] | None:
    """Cached: a value checked at validation is read again as an instant (collapse, limits)."""
    m = _RFC3339.match(value)
    if m is None:
        return None
    year, month, day = int(m[1]), int(m[2]), int(m[3])
    if year == 0 or not 1 <= day <= _days_in(year, month):
        return None
    return m


def _days_in(year: int, month: int) -> int:
    if month == 2:
        return 29 if calendar.isleap(year) else 28
    return _DAYS[month]


def is_datetime(value: str) -> bool:
    return _match(value) is not None


def check_datetime(value: str) -> str:
    """Pydantic after-validator: the value stays as written, only its form is checked."""
    if _match(value) is None:
        raise ValueError("not an RFC 3339 date-time")
    return value


@functools.lru_cache(maxsize=4096)
def instant_ns(value: str) -> int:
    """Nanoseconds since the epoch (UTC) of a valid date-time, for equality and ordering
    (remembered: a decision's instant is asked for by its limits, its natural keys and its
    order in a turn)."""
    m = _match(value)
    if m is None:
        raise ValueError(f"not an RFC 3339 date-time: {value!r}")
    days = datetime(int(m[1]), int(m[2]), int(m[3])).toordinal() - _EPOCH_DAYS
    seconds = days * 86400 + int(m[4]) * 3600 + int(m[5]) * 60 + int(m[6])
    if m[8] not in ("Z", "z"):
        offset = int(m[10]) * 3600 + int(m[11]) * 60
        seconds -= offset if m[9] == "+" else -offset
    fraction = int((m[7] or "0")[:9].ljust(9, "0"))
    return seconds * 1_000_000_000 + fraction


def format_utc(epoch_seconds: float) -> str:
    """The processor's own timestamps: UTC, microseconds, ``Z``, as
    ``datetime.fromtimestamp(s, UTC).isoformat(timespec="microseconds")`` spells them, with
    the microseconds rounded as it rounds them (half to even, a carry into the second). The
    date and time of day are made once a second: every turn header has a timestamp, and
    timestamps made together share their second, so most only format their microseconds."""
    fraction, whole = math.modf(epoch_seconds)
    micros = round(fraction * 1e6)
    if micros >= 1_000_000:
        whole, micros = whole + 1.0, micros - 1_000_000
    elif micros < 0:
        whole, micros = whole - 1.0, micros + 1_000_000
    return f"{_second(int(whole))}.{micros:06d}Z"


@functools.lru_cache(maxsize=256)
def _second(whole: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS`` of a whole second since the epoch, UTC."""
    return datetime.fromtimestamp(whole, UTC).isoformat()[:-6]

"""RFC 3339 instants (``models/timestamps.py``): two spellings of one moment are one instant."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stream_app.models.timestamps import check_datetime, format_utc, instant_ns


@pytest.mark.parametrize(
    "spelling",
    [
        "2026-01-01T10:00:00Z",
        "2026-01-01t10:00:00z",  # RFC 3339 allows the letters in lower case
        "2026-01-01T10:00:00.000Z",
        "2026-01-01T12:00:00+02:00",
        "2026-01-01T08:30:00-01:30",
        "2026-01-01t12:00:00+02:00",
    ],
)
def test_every_spelling_of_one_moment_is_the_same_instant(spelling: str) -> None:
    assert check_datetime(spelling) == spelling  # kept as written
    assert instant_ns(spelling) == instant_ns("2026-01-01T10:00:00Z")


@pytest.mark.parametrize(
    "value",
    ["2026-02-29T00:00:00Z", "2026-01-01 10:00:00Z", "2026-01-01T10:00:00", "0000-01-01T00:00:00Z"],
)
def test_what_is_no_instant_is_refused_each_time_it_is_asked(value: str) -> None:
    for _ in range(2):  # the second answer comes from the cache
        with pytest.raises(ValueError):
            check_datetime(value)
        with pytest.raises(ValueError):
            instant_ns(value)


def _isoformat_utc(epoch_seconds: float) -> str:
    """What ``format_utc`` spelled before it formatted a second once: the reference."""
    moment = datetime.fromtimestamp(epoch_seconds, UTC)
    return moment.isoformat(timespec="microseconds")[:-6] + "Z"


@pytest.mark.parametrize(
    "epoch_seconds",
    [
        0.0,
        1.5,
        1_700_000_000.0,
        1_700_000_000.9999995,  # rounds up into the next second
        1_700_000_000.0000005,
        1_700_000_000.0000015,
        1_700_000_059.9999996,  # a carry that changes the minute
        4_102_444_799.9999999,  # the last instant of 2099, carried into 2100
        -0.25,
        -1.0000004,
    ],
)
def test_format_utc_spells_an_instant_as_isoformat_does(epoch_seconds: float) -> None:
    assert format_utc(epoch_seconds) == _isoformat_utc(epoch_seconds)


@given(st.floats(min_value=-1e9, max_value=7.2e9, allow_nan=False))
def test_format_utc_agrees_with_isoformat_on_any_instant(epoch_seconds: float) -> None:
    assert format_utc(epoch_seconds) == _isoformat_utc(epoch_seconds)

"""RFC 3339 instants (``models/timestamps.py``): two spellings of one moment are one instant."""

from __future__ import annotations

import pytest

from stream_app.models.timestamps import check_datetime, instant_ns


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

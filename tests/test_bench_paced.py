"""``python -m bench --paced`` times the same records through the core each way."""

from __future__ import annotations

import pytest

from bench import paced
from bench.workload import generate


def test_each_way_is_timed_on_the_whole_workload_and_reported_against_flat_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    timed: list[int] = []
    cost = paced.cost

    def counting(payload: list[bytes], *way: object) -> float:
        timed.append(len(payload))
        return cost(payload, *way)  # type: ignore[arg-type]

    monkeypatch.setattr(paced, "cost", counting)
    lines = list(generate(300, 20, seed=3))
    found = paced.measure(lines, rounds=1)
    assert set(found) == set(paced.WAYS)
    assert timed == [300] * len(paced.WAYS)
    assert all(0 < us < 1e6 for us in found.values())
    report = paced.report(found, len(lines))
    assert "flat out" in report and "1.00x" in report

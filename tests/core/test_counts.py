"""Dead-letter counts come from ``Reason``: a new reason is one enum member (and the schema),
never also a line in ``core/counts.py``."""

from __future__ import annotations

import importlib.util
import sys
import types
from enum import StrEnum

import pytest

from stream_app.core import counts
from stream_app.models import dead_letter


def test_a_new_reason_is_counted_with_no_edit_of_the_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    members = {r.name: r.value for r in dead_letter.Reason} | {"NEW_REASON": "new_reason"}
    reason = StrEnum("Reason", members)  # type: ignore[misc]
    stub = types.ModuleType(dead_letter.__name__)
    stub.Reason = reason  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, dead_letter.__name__, stub)
    spec = importlib.util.spec_from_file_location("counts_again", counts.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    new = reason("new_reason")
    count = module.Count.dead_letter(new)
    assert count == "dead_letter:new_reason" and count.reason is new
    assert {c.reason for c in module.Count if c.reason is not None} == set(reason)


def test_every_reason_has_its_count_and_nothing_else_is_one() -> None:
    dead = {c for c in counts.Count if c.reason is not None}
    assert {c.reason for c in dead} == set(dead_letter.Reason)
    assert all(c.value == f"dead_letter:{c.reason}" for c in dead)
    assert not any(name.startswith("_") for name in counts.Count.__members__)

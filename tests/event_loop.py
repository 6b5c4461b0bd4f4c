"""Where code gives the event loop back: slices used up at once, and another task that
notes each turn of the loop it gets meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import TypeVar

import pytest

from stream_app.runtime.slices import Slices

T = TypeVar("T")


def slices_of_nothing(monkeypatch: pytest.MonkeyPatch, module: ModuleType) -> None:
    """``module``'s ``Slices`` give the loop back at every call."""
    monkeypatch.setattr(module, "Slices", lambda: Slices(0.0), raising=False)


async def beside_another_task(work: Awaitable[T], note: Callable[[], object]) -> T:
    """Awaits ``work``, another task calling ``note`` at every turn of the loop it gets
    until ``work`` is done."""
    done = False

    async def other_task() -> None:
        while not done:
            note()
            await asyncio.sleep(0)

    other = asyncio.create_task(other_task())
    await asyncio.sleep(0)  # its first turn, before the work begins
    try:
        return await work
    finally:
        done = True
        await other

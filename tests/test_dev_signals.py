"""dev's first signal is never lost to asyncio (``stream-app dev``, issue 10 item 8).

A Python signal handler runs between two bytecodes of the main thread, wherever it is. An
exception raised there inside the event loop's own code (a callback's ``Handle._run``) is
logged and swallowed by asyncio: dev would have printed that it stops, then served on with
nobody to stop it. These land the signal at those moments by hand, without processes.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from stream_app.cli import dev


def _signal_in_a_loop_callback(
    lifeline: dev._Lifeline,
) -> Callable[[Coroutine[Any, Any, object]], object]:
    """``asyncio.run`` whose loop runs one callback of its own, the signal arriving in it,
    before dev's coroutine takes its first step."""
    real_run = asyncio.run

    def run(main: Coroutine[Any, Any, object]) -> object:
        async def loop_first() -> object:
            asyncio.get_running_loop().call_soon(lifeline._on_signal, signal.SIGTERM, None)
            await asyncio.sleep(0)  # the callback runs here
            return await main

        return real_run(loop_first())

    return run


def test_a_signal_inside_the_loop_before_dev_serves_stops_dev(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lifeline = dev._Lifeline()
    monkeypatch.setattr(asyncio, "run", _signal_in_a_loop_callback(lifeline))
    served = []

    async def serve() -> str:
        served.append(True)
        return "served on"

    with pytest.raises(dev._Stop):
        lifeline.run_async(serve)
    assert lifeline.signalled
    assert served == []


def test_a_signal_while_the_loop_closes_stops_dev_once_it_has_closed() -> None:
    lifeline = dev._Lifeline()

    async def serve() -> str:
        # Done, but the signal comes before asyncio.run has returned (as while it closes).
        asyncio.get_running_loop().call_soon(lifeline._on_signal, signal.SIGTERM, None)
        return "served"

    with pytest.raises(dev._Stop):
        lifeline.run_async(serve)


def test_a_signal_while_dev_serves_cancels_what_it_runs() -> None:
    lifeline = dev._Lifeline()
    cancelled = []

    async def serve() -> None:
        asyncio.get_running_loop().call_later(0.01, lifeline._on_signal, signal.SIGINT, None)
        try:
            await asyncio.Event().wait()  # served until told
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    with pytest.raises(dev._Stop):
        lifeline.run_async(serve)
    assert cancelled == [True]

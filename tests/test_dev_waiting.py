"""Issue 43 item 1: ``stream-app dev`` says so when messages or decisions wait too long.

dev's worker names what has waited 10 s (unless the environment says otherwise), at its
next tick (every second), and dev prints the worker's ``waiting_too_long`` lines as it
writes them."""

from __future__ import annotations

import asyncio
import logging
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from stream_app.broker.embedded import EmbeddedBroker
from stream_app.cli import dev
from stream_app.observability import logs


def _event(name: str, **fields: object) -> bytes:
    return orjson.dumps({"ts": "2026-01-01T10:00:00Z", "level": "warning", "event": name, **fields})


MESSAGES = _event(
    "waiting_too_long",
    session_id="s1",
    kind="messages",
    waiting=2,
    age_seconds=12.5,
    threshold_seconds=10.0,
    hint="no assistant message with finishReason has closed them into a turn",
)
DECISIONS = _event(
    "waiting_too_long",
    session_id="s2",
    kind="decisions",
    waiting=1,
    age_seconds=11.0,
    threshold_seconds=10.0,
    hint="no turn has the inference_call_id or tool-call id their call_id names",
)


def test_a_waiting_line_says_what_waits_where_for_how_long_and_why() -> None:
    assert dev.waiting_line(MESSAGES) == (
        "waiting: session 's1': 2 messages have waited 12.5 s for a finishing message "
        "(no assistant message with finishReason has closed them into a turn)"
    )
    assert dev.waiting_line(DECISIONS) == (
        "waiting: session 's2': 1 decision has waited 11 s for its turn "
        "(no turn has the inference_call_id or tool-call id their call_id names)"
    )
    more = dev.waiting_line(_event("waiting_too_long_more", sessions=7, partition=0))
    assert more is not None and more.startswith("waiting: 7 more sessions crossed")
    for other in (_event("dead_letter", reason="schema"), b"not json", b"{broken", b"[1]"):
        assert dev.waiting_line(other) is None


def test_the_worker_logs_lines_dev_reads() -> None:
    # The worker's line, as logs.event writes it to a file (JSON), is one dev prints.
    written: list[str] = []

    class File:
        def write(self, text: str) -> None:
            written.append(text)

        def flush(self) -> None:
            pass

        def isatty(self) -> bool:
            return False

    events = logging.getLogger("stream_app.events")
    handlers = events.handlers[:]
    try:
        logs.configure(File())
        fields = orjson.loads(MESSAGES)
        del fields["ts"], fields["level"], fields["event"]
        logs.event("waiting_too_long", logging.WARNING, **fields)
    finally:
        events.handlers[:] = handlers
    (line,) = [text for text in written if text.strip()]
    assert dev.waiting_line(line.strip().encode()) == dev.waiting_line(MESSAGES)


def test_dev_follows_the_worker_log_as_it_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "worker.log"

    async def follow() -> list[str]:
        task = asyncio.ensure_future(dev._follow_waiting(log))
        try:
            await asyncio.sleep(0)  # no log yet: nothing, and no error
            log.write_bytes(b"starting\n" + MESSAGES + b"\n" + DECISIONS[:20])  # one half-written
            shown: list[str] = []
            deadline = asyncio.get_running_loop().time() + 10
            while len(shown) < 2:
                assert asyncio.get_running_loop().time() < deadline, shown
                await asyncio.sleep(dev.WATCH_INTERVAL)
                shown += capsys.readouterr().out.splitlines()
                if len(shown) == 1:
                    with open(log, "ab") as file:  # the rest of the line comes
                        file.write(DECISIONS[20:] + b"\n")
            return shown
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    shown = asyncio.run(follow())
    assert [line.split(":")[1] for line in shown] == [" session 's1'", " session 's2'"]


def test_devs_worker_warns_soon_unless_told_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[dict[str, str]] = []

    def popen(*args: Any, env: dict[str, str], **kwargs: Any) -> Any:
        started.append(env)
        return None

    monkeypatch.setattr(subprocess, "Popen", popen)
    broker = EmbeddedBroker.__new__(EmbeddedBroker)
    monkeypatch.setattr(EmbeddedBroker, "url", property(lambda self: "kafka://127.0.0.1:1"))
    monkeypatch.delenv("STREAM_APP_WAITING_WARN_SECONDS", raising=False)
    monkeypatch.delenv("STREAM_APP_SWEEP_INTERVAL_SECONDS", raising=False)
    dev._start_worker(broker, tmp_path)  # type: ignore[arg-type]
    monkeypatch.setenv("STREAM_APP_WAITING_WARN_SECONDS", "600")
    dev._start_worker(broker, tmp_path)  # type: ignore[arg-type]
    assert started[0]["STREAM_APP_WAITING_WARN_SECONDS"] == "10"
    assert "STREAM_APP_SWEEP_INTERVAL_SECONDS" not in started[0]  # no sweep: the tick reports
    assert started[1]["STREAM_APP_WAITING_WARN_SECONDS"] == "600"

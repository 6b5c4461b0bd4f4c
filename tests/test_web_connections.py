"""Issue 44 item 4: connections that never finish a request cannot take the probes down.

A worker started with a low open-file limit is held by more idle connections than that
limit; ``/health`` and ``/ready`` must still answer at once, the idle connections must be
closed once they have held their place for the header timeout, Kafka work goes on, and a
request with an oversized header is a 400 that quotes nothing of it (not in the answer, not
in the log).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import selectors
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import faust
import orjson
import pytest

from stream_app.broker.embedded import free_port
from stream_app.worker import web_server
from stream_app.worker.web_auth import guard_faust_views
from stream_app.worker.web_server import HEADER_TIMEOUT, KEEPALIVE_TIMEOUT, Limits
from tests.kafka_io import final_turns
from tests.test_app import Pipeline, session_lines
from tests.worker_process import WorkerProcess

T = TypeVar("T")
TOKEN = "s3ssions-are-chat-content"
OPEN_FILES = 256  # the worker's soft RLIMIT_NOFILE
IDLE = 2 * OPEN_FILES  # idle connections opened against it
# Runs the worker's command with a lower soft open-file limit (argv: the command).
WITH_LIMIT = (
    "import os, resource, sys\n"
    "_, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
    "resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, hard))\n"
    "os.execv(sys.argv[1], sys.argv[1:])\n"
)


def with_open_files(worker: WorkerProcess, limit: int) -> WorkerProcess:
    worker.command = [sys.executable, "-c", WITH_LIMIT.format(limit=limit), *worker.command]
    return worker


def get(port: int, path: str, timeout: float, headers: dict[str, str] | None = None) -> int:
    """The status of one GET on a new connection; 0 when none came within ``timeout``."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def answers_within(port: int, path: str, deadline: float) -> int:
    """The first status other than 'no answer' before the deadline (each try up to 1 s)."""
    status = 0
    while status == 0 and time.monotonic() < deadline:
        status = get(port, path, timeout=1.0)
    return status


def open_idle(port: int, count: int) -> list[socket.socket]:
    """Up to ``count`` connections that send nothing; stops at the first that does not open."""
    opened = []
    for _ in range(count):
        s = socket.socket()
        s.settimeout(2.0)
        try:
            s.connect(("127.0.0.1", port))
        except OSError:
            s.close()
            break
        opened.append(s)
    return opened


def closed_by_peer(s: socket.socket) -> bool:
    try:
        return s.recv(1, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:  # reset
        return True


def wait_all_closed(sockets: list[socket.socket], deadline: float) -> list[socket.socket]:
    """The sockets the peer has not closed by the deadline."""
    left = [s for s in sockets if not closed_by_peer(s)]
    with selectors.DefaultSelector() as selector:
        for s in left:
            selector.register(s, selectors.EVENT_READ, data=s)
        while left and (wait := deadline - time.monotonic()) > 0:
            for key, _ in selector.select(wait):
                s = key.data
                if closed_by_peer(s):
                    selector.unregister(s)
                    left.remove(s)
    return left


def raw_exchange(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(request)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    return answer


def log_lines(worker: WorkerProcess, event: str) -> list[dict[str, object]]:
    lines = worker.log.read_text().splitlines()
    return [orjson.loads(x) for x in lines if x.startswith("{") and f'"{event}"' in x]


@pytest.mark.broker
def test_idle_connections_past_the_open_file_limit_leave_the_probes_answering(
    pipeline: Pipeline,
) -> None:
    p = pipeline
    worker = with_open_files(p.worker("limited"), OPEN_FILES)
    worker.env["STREAM_APP_WEB_TOKEN"] = TOKEN
    worker.start().wait_ready()

    opened_at = time.monotonic()
    idle = open_idle(worker.port, IDLE)
    try:
        # A liveness probe's answer, whatever the idle connections hold.
        assert answers_within(worker.port, "/health", time.monotonic() + 5) == 200
        assert answers_within(worker.port, "/ready", time.monotonic() + 5) == 200
        assert len(idle) == IDLE, f"only {len(idle)} of {IDLE} connections opened"
        assert worker.process is not None and worker.process.poll() is None

        # A header past aiohttp's line limit: refused, quoting nothing of the request.
        oversized = f"Bearer {TOKEN}" + "x" * 9000
        answer = raw_exchange(
            worker.port,
            f"GET /sessions/s1 HTTP/1.1\r\nHost: w\r\nAuthorization: {oversized}\r\n\r\n".encode(),
        )
        assert answer.startswith(b"HTTP/1.1 400 ") or answer.startswith(b"HTTP/1.0 400 "), answer
        body = answer.partition(b"\r\n\r\n")[2]
        assert TOKEN.encode() not in body and b"xxxx" not in body, body
        assert b"Bearer" not in body, body

        # Every idle connection is closed: each at the latest once its header timeout is up.
        left = wait_all_closed(idle, opened_at + HEADER_TIMEOUT + 5)
        assert left == [], f"{len(left)} idle connections still open"
    finally:
        for s in idle:
            s.close()

    # Kafka's connections and RocksDB's files were left their share: records go through.
    p.publish([line for line in session_lines() if line["topic"] == "messages"])
    p.turns.wait_until(lambda: len(final_turns(p.turns)) == 4, 60, "4 turns")
    assert get(worker.port, "/health", timeout=5) == 200
    log = worker.log.read_text()
    assert TOKEN not in log and "xxxxxxxx" not in log
    # The limits the worker found, said once at start-up.
    [limits] = log_lines(worker, "web_connections")
    assert limits["open_files"] == OPEN_FILES and limits["max_connections"] == OPEN_FILES // 4
    assert limits["header_timeout_s"] == HEADER_TIMEOUT
    assert limits["keepalive_timeout_s"] == KEEPALIVE_TIMEOUT


# -- the limits, on a minimal Faust app served by the worker's web driver ------------------


@pytest.mark.parametrize(
    ("open_files", "connections"),
    [
        (1024, 256),  # a quarter of the descriptors
        (256, 64),
        (10, 4),  # at least a few
        (1_048_576, 1024),  # at most 1,024
        (resource.RLIM_INFINITY, 1024),
    ],
)
def test_the_cap_is_a_quarter_of_the_open_file_limit_within_bounds(
    open_files: int, connections: int
) -> None:
    found = Limits.of(open_files)
    assert (found.open_files, found.connections) == (open_files, connections)


class Slow:
    """``/slow``'s views: each says when it runs, and answers once released."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.running: asyncio.Queue[None] = asyncio.Queue()

    async def started(self, count: int) -> None:
        async with asyncio.timeout(5):
            for _ in range(count):
                await self.running.get()


def minimal_app(port: int) -> tuple[faust.App, Slow]:
    """Pages as the worker's: ``/health``, and ``/slow`` (:class:`Slow`)."""
    app = faust.App(
        "web-connections-test",
        broker="memory://",
        store="memory://",
        web=web_server.WEB,
        web_bind="127.0.0.1",
        web_port=port,
        web_tables_enabled=False,
    )
    views = Slow()

    @app.page("/health")
    async def health(web: Any, request: Any) -> Any:
        return web.json({"status": "live"})

    @app.page("/slow")
    async def slow(web: Any, request: Any) -> Any:
        views.running.put_nowait(None)
        await views.release.wait()
        return web.json({"status": "done"})

    guard_faust_views(app, None)
    return app, views


@asynccontextmanager
async def serving(
    monkeypatch: pytest.MonkeyPatch, limits: Limits
) -> AsyncIterator[tuple[int, Slow]]:
    """The app's web server as the worker starts it, with these limits, on a free port."""
    monkeypatch.setattr(web_server, "limits", lambda: limits)
    port = free_port()
    app, views = minimal_app(port)
    assert isinstance(app.web, web_server.Web)
    app.web.init_server()
    await app.web.start_server()
    try:
        yield port, views
    finally:
        views.release.set()
        await app.web.stop_server()


def capped(connections: int) -> Limits:
    """A cap of ``connections``, timeouts too long to close a connection during a test."""
    return Limits(open_files=16, connections=connections, header_timeout=60, keepalive_timeout=60)


def run_serving(
    monkeypatch: pytest.MonkeyPatch,
    limits: Limits,
    scenario: Callable[[int, Slow], Awaitable[T]],
) -> T:
    """Runs ``scenario`` against the server (:func:`serving`), given its port and ``/slow``."""

    async def run() -> T:
        async with serving(monkeypatch, limits) as (port, slow):
            return await scenario(port, slow)

    return asyncio.run(run())


class Client:
    """One connection, spoken to byte by byte."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.opened = time.monotonic()

    @staticmethod
    async def open(port: int) -> Client:
        return Client(*await asyncio.open_connection("127.0.0.1", port))

    def send(self, data: bytes) -> None:
        self.writer.write(data)

    async def closed_within(self, seconds: float) -> float | None:
        """Seconds from opening until the server closed it (reading what it sent), or None
        if it is still open after ``seconds`` more."""
        try:
            async with asyncio.timeout(seconds):
                while await self.reader.read(65536):
                    pass
        except TimeoutError:
            return None
        except ConnectionResetError:
            pass
        return time.monotonic() - self.opened

    async def answer(self, timeout: float = 5.0) -> bytes:
        async with asyncio.timeout(timeout):
            head = await self.reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            return head + await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


def get_request(path: str, *extra: str) -> bytes:
    return "\r\n".join([f"GET {path} HTTP/1.1", "Host: w", *extra, "", ""]).encode()


def test_a_connection_without_a_complete_request_is_closed_after_the_header_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    limits = Limits(open_files=1024, connections=64, header_timeout=0.5, keepalive_timeout=1.5)

    async def scenario(port: int, _: Slow) -> None:
        silent = await Client.open(port)
        partial = await Client.open(port)
        partial.send(b"GET /health HTTP/1.1\r\nHost: w\r\n")  # headers never ended
        dribbling = await Client.open(port)
        kept = await Client.open(port)
        kept.send(get_request("/health"))
        assert b" 200 " in await kept.answer()

        async def dribble() -> None:  # a byte of header every 0.1 s
            for byte in b"GET /health HTTP/1.1\r\nHost: w\r\nX-Slow: " + b"y" * 100:
                dribbling.send(bytes([byte]))
                await asyncio.sleep(0.1)

        dribbler = asyncio.create_task(dribble())
        for client in (silent, partial, dribbling):
            after = await client.closed_within(3)
            assert after is not None and 0.4 <= after < 3, after
        dribbler.cancel()
        # Answered, it waits for its next request up to the keep-alive timeout instead.
        assert await kept.closed_within(0.5) is None
        kept.send(get_request("/health"))
        assert b" 200 " in await kept.answer()
        asked = time.monotonic()
        assert await kept.closed_within(3) is not None
        assert 1.3 <= time.monotonic() - asked < 4

    run_serving(monkeypatch, limits, scenario)


def test_past_the_cap_the_longest_waiting_connection_gives_way_never_a_busy_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario(port: int, slow: Slow) -> None:
        busy = await Client.open(port)
        busy.send(get_request("/slow"))
        await slow.started(1)
        idle = [await Client.open(port) for _ in range(6)]
        probe = await Client.open(port)
        probe.send(get_request("/health"))
        assert b" 200 " in await probe.answer()
        # Five connections past a cap of four: the five that waited longest went.
        for client in idle[:4]:
            assert await client.closed_within(2) is not None
        for client in idle[4:]:
            assert await client.closed_within(0.2) is None
        slow.release.set()
        assert b" 200 " in await busy.answer()
        for client in [*idle, busy, probe]:
            client.close()

    run_serving(monkeypatch, capped(connections=4), scenario)


def test_with_every_connection_busy_a_new_one_is_closed_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario(port: int, slow: Slow) -> None:
        busy = [await Client.open(port) for _ in range(2)]
        for client in busy:
            client.send(get_request("/slow"))
        await slow.started(2)
        late = await Client.open(port)
        assert await late.closed_within(2) is not None
        slow.release.set()
        for client in busy:
            assert b" 200 " in await client.answer()
            client.close()

    run_serving(monkeypatch, capped(connections=2), scenario)


TOKEN_TEXT = "s3ssions-are-chat-content"
UNPARSABLE = [
    get_request("/health", f"Authorization: Bearer {TOKEN_TEXT}" + "x" * 9000),  # a value
    get_request("/health", f"X-{TOKEN_TEXT}" + "x" * 9000 + ": v"),  # a name
    get_request(f"/{TOKEN_TEXT}" + "x" * 9000),  # the request line
    get_request("/health", *[f"X-{i}: {TOKEN_TEXT}" for i in range(200)]),  # too many
    get_request("/health", f"Bad Header {TOKEN_TEXT}"),  # no colon
]


@pytest.mark.parametrize("request_bytes", UNPARSABLE, ids=["value", "name", "line", "many", "bad"])
def test_an_unparsable_request_is_a_400_that_quotes_nothing_of_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, request_bytes: bytes
) -> None:
    caplog.set_level(logging.DEBUG)
    limits = Limits(open_files=1024, connections=64)

    async def scenario(port: int, _: Slow) -> bytes:
        client = await Client.open(port)
        client.send(request_bytes)
        answer = await client.answer()
        assert await client.closed_within(2) is not None  # and the connection closed
        return answer

    answer = run_serving(monkeypatch, limits, scenario)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0].endswith(b" 400 Bad Request"), head
    assert body == b"400 Bad Request\n"
    assert TOKEN_TEXT not in caplog.text and "xxxxxxxx" not in caplog.text
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []

"""Issue 11 item 3: ``STREAM_APP_WEB_TOKEN`` guards ``/sessions/{id}`` (chat content), on the
worker asked and on the owner the request is forwarded to; the probes and ``/metrics`` stay
open, and Faust's own table views, which would serve the same content, are off.

Issue 20 item 6: whatever bytes an ``Authorization`` header holds, the answer is 401 (it was
a 500 and a ``UnicodeEncodeError``); a token no client can send as typed (a trailing newline,
a space, a control character) is refused at start-up in one line; Faust's ``/router/`` views,
a map of the cluster, need the token too. The web tests run a minimal Faust app's real
aiohttp server on a free loopback port and speak HTTP to it over a socket.
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import faust
import pytest
from aiohttp.test_utils import TestServer
from pydantic import SecretStr

from stream_app.config import load_settings
from stream_app.worker.web_auth import authorized, guard_faust_views, requires_token
from tests.kafka_io import final_turns
from tests.test_app import Pipeline, assigned, session_lines
from tests.test_config import refused

TOKEN = "s3ssions-are-chat-content"


@pytest.mark.parametrize(
    ("header", "ok"),
    [
        (f"Bearer {TOKEN}", True),
        (f"bearer {TOKEN}", True),  # the scheme is case-insensitive (RFC 7235)
        (f"Bearer  {TOKEN} ", True),
        (None, False),
        ("", False),
        (TOKEN, False),  # no scheme
        (f"Basic {TOKEN}", False),
        (f"Bearer {TOKEN[:-1]}", False),
        (f"Bearer {TOKEN}x", False),
        ("Bearer ", False),
        ("Bearer", False),
        (f"Bearer {TOKEN}\u00e9", False),  # non-ASCII: hmac refuses such a str outright
        ("Bearer \u00fc\u00f6\u00e4", False),
        ("Bearer \udcff\udcfe", False),  # undecodable bytes, as aiohttp hands them over
        ("Bearer \ud800", False),  # a lone surrogate, which surrogateescape cannot encode
        ("\udcff\udcff", False),
        ("Bearer \x00", False),
        ("B\u00e9arer " + TOKEN, False),
        ("Bearer\t" + TOKEN, False),
    ],
)
def test_only_the_bearer_token_is_authorized(header: str | None, ok: bool) -> None:
    headers = {} if header is None else {"Authorization": header}
    assert authorized(headers, TOKEN) is ok


def _get(port: int, path: str, token: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return int(r.status), r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.mark.broker
def test_sessions_need_the_token_on_every_worker_and_the_rest_stays_open(
    pipeline: Pipeline,
) -> None:
    p = pipeline
    workers = [p.worker("first"), p.worker("second")]
    for w in workers:
        w.env["STREAM_APP_WEB_TOKEN"] = TOKEN
        w.start()
    for w in workers:
        w.wait_ready()
    p.turns.wait_until(
        lambda: all(assigned(w) for w in workers), 60, "both workers to own partitions"
    )
    p.publish([line for line in session_lines() if line["topic"] == "messages"])
    p.turns.wait_until(lambda: len(final_turns(p.turns)) == 4, 60, "4 turns")

    answers = []
    for w in workers:  # one of them owns the session: the other forwards the request
        for wrong in (None, "not-the-token-at-all"):
            status, body = _get(w.port, "/sessions/sess-7f3a", wrong)
            assert status == 401, (w.log, wrong)
            assert b"sess-7f3a" not in body
        status, body = _get(w.port, "/sessions/sess-7f3a", TOKEN)
        assert status == 200, (w.log, body)
        answers.append(json.loads(body))
        for path in ("/health", "/ready", "/metrics"):
            assert _get(w.port, path)[0] == 200, path
        # Faust's table views would serve the same state without the token.
        assert _get(w.port, "/table/sessions/")[0] == 404
        # Faust's router views map the cluster (hosts and partitions): the token too.
        for path in ("/router/", "/router/sessions/", "/router/sessions/sess-7f3a/"):
            assert _get(w.port, path)[0] == 401, path
        assert _get(w.port, "/router/", TOKEN)[0] == 200
    assert answers[0] == answers[1]
    assert answers[0]["session_id"] == "sess-7f3a" and len(answers[0]["turns"]) == 4


# -- any malformed header is a 401, over real HTTP ----------------------------------------

SECRET = SecretStr(TOKEN)
MALFORMED = [
    b"Bearer \xff\xfe\xfd",  # not UTF-8
    "Bearer \u00e9".encode("latin-1"),  # Latin-1, as urllib and requests send it
    "Bearer \u00fc\u00f6\u00e4-not-the-token".encode(),  # UTF-8, non-ASCII
    "Bearer \u00e9".encode() + TOKEN.encode(),
    b"Bearer \xed\xa0\x80",  # an encoded surrogate
    b"\xff\xff",  # no scheme, not text
    b"",
    b"Bearer",
    b"Bearer ",
    b"Basic " + TOKEN.encode(),
    TOKEN.encode(),
    b"garbage garbage garbage",
    b"Bearer " + b"x" * 8000,
]


def minimal_app(token: SecretStr | None) -> faust.App:
    """A Faust app with a page guarded as ``/sessions/{id}`` is, and Faust's own views."""
    app = faust.App(
        "web-token-test", broker="memory://", store="memory://", web_tables_enabled=False
    )

    @app.page("/sessions/{session_id}")
    @requires_token(token)
    async def session_state(web: Any, request: Any, session_id: str) -> Any:
        return web.json({"session_id": session_id})

    @app.page("/health")
    async def health(web: Any, request: Any) -> Any:
        return web.json({"status": "live"})

    guard_faust_views(app, token)
    return app


@contextmanager
def serving(app: faust.App) -> Iterator[tuple[asyncio.AbstractEventLoop, int]]:
    """Faust's aiohttp application, routes and middlewares as a worker's, on a free port."""
    app.web.init_server()  # what the worker's web service does when it starts
    loop = asyncio.new_event_loop()
    server = TestServer(app.web.web_app, host="127.0.0.1")  # type: ignore[attr-defined]
    loop.run_until_complete(server.start_server())
    try:
        assert server.port is not None
        yield loop, server.port
    finally:
        loop.run_until_complete(server.close())
        loop.close()


def status_of(
    loop: asyncio.AbstractEventLoop, port: int, path: str, authorization: bytes | None
) -> int:
    """The status line's code for a GET whose ``Authorization`` is these exact bytes."""

    async def get() -> int:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        header = b"" if authorization is None else b"Authorization: " + authorization + b"\r\n"
        writer.write(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n".encode()
            + header
            + b"\r\n"
        )
        answer = await reader.read()
        writer.close()
        await writer.wait_closed()
        return int(answer.split(b" ", 2)[1])

    return loop.run_until_complete(get())


def test_a_malformed_authorization_header_is_a_401_and_logs_no_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    with serving(minimal_app(SECRET)) as (loop, port):
        statuses = {
            (path, header): status_of(loop, port, path, header)
            for path in ("/sessions/s1", "/router/")
            for header in MALFORMED
        }
        good = b"Bearer " + TOKEN.encode()
        assert status_of(loop, port, "/sessions/s1", good) == 200
        assert status_of(loop, port, "/router/", good) == 200
    assert {k: v for k, v in statuses.items() if v != 401} == {}
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert "UnicodeEncodeError" not in caplog.text


def test_an_invalid_header_byte_is_refused_before_any_view() -> None:
    """A NUL or another control byte makes the request no HTTP at all: aiohttp's parser
    answers 400 before any view runs, so nothing is served and nothing reaches the check."""
    with serving(minimal_app(SECRET)) as (loop, port):
        assert status_of(loop, port, "/sessions/s1", b"Bearer \x00" + TOKEN.encode()) == 400
        assert status_of(loop, port, "/router/", b"Bearer \x01") == 400


# -- Faust's /router views need the token too ---------------------------------------------

ROUTER = ["/router/", "/router/topics", "/router/sessions/", "/router/sessions/sess-7f3a/"]


def test_faust_router_views_need_the_token_and_the_probes_stay_open() -> None:
    with serving(minimal_app(SECRET)) as (loop, port):
        for path in ROUTER:
            assert status_of(loop, port, path, None) == 401, path
            assert status_of(loop, port, path, b"Bearer not-the-token-at-all") == 401, path
        # With the token Faust answers as it would: the table is unknown to this minimal
        # app, so its views may fail, but never for want of the token.
        assert status_of(loop, port, "/router/", b"Bearer " + TOKEN.encode()) == 200
        assert status_of(loop, port, "/router/topics", b"Bearer " + TOKEN.encode()) == 200
        assert status_of(loop, port, "/health", None) == 200
        assert status_of(loop, port, "/", None) == 200  # Faust's {"status": "OK"}
        assert status_of(loop, port, "/no/such/view", None) == 404
        assert status_of(loop, port, "/table/sessions/", None) == 404  # off


def test_without_a_token_nothing_is_guarded() -> None:
    with serving(minimal_app(None)) as (loop, port):
        assert status_of(loop, port, "/router/", None) == 200
        assert status_of(loop, port, "/sessions/s1", None) == 200


# -- a token no client can send as typed is refused at start-up ---------------------------


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (TOKEN + "\n", "whitespace or control characters"),  # `echo` into a Secret
        (TOKEN + "\r\n", "whitespace or control characters"),
        (" " + TOKEN, "whitespace or control characters"),
        (TOKEN[:8] + " " + TOKEN[8:], "whitespace or control characters"),
        (TOKEN[:8] + "\t" + TOKEN[8:], "whitespace or control characters"),
        (TOKEN + "\x07", "whitespace or control characters"),
        (TOKEN + "\x1b[0m", "whitespace or control characters"),
        (TOKEN + "\u200b", "whitespace or control characters"),  # zero-width space
        (TOKEN + "\u00e9", "must be ASCII"),
        ("short-token", "must be at least 16 characters"),
    ],
)
def test_a_token_no_client_can_send_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch, value: str, words: str
) -> None:
    line = refused(monkeypatch, "STREAM_APP_WEB_TOKEN", value)
    assert line.startswith("STREAM_APP_WEB_TOKEN: ") and words in line
    assert "\n" not in line and "items" not in line and "validation" not in line
    assert value not in line and value.strip()[:10] not in line


def test_a_token_of_printable_ascii_is_taken_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    token = "A-b_c.d~e+f/g=h!i#j$k%l&m*n?o@p^q|r"
    monkeypatch.setenv("STREAM_APP_WEB_TOKEN", token)
    settings = load_settings()
    assert settings.web_token is not None and settings.web_token.get_secret_value() == token

"""Issue 11 item 3: ``STREAM_APP_WEB_TOKEN`` guards ``/sessions/{id}`` (chat content), on the
worker asked and on the owner the request is forwarded to; the probes and ``/metrics`` stay
open, and Faust's own table views, which would serve the same content, are off."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from stream_app.embedded_broker import EmbeddedBroker
from stream_app.web_auth import authorized
from tests.kafka_io import final_turns
from tests.test_app import Pipeline, assigned, example_lines

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
    broker: EmbeddedBroker, topics: dict[str, str], workdir: Path
) -> None:
    p = Pipeline(broker, topics, workdir)
    try:
        workers = [p.worker("first"), p.worker("second")]
        for w in workers:
            w.env["STREAM_APP_WEB_TOKEN"] = TOKEN
            w.start()
        for w in workers:
            w.wait_ready()
        p.turns.wait_until(
            lambda: all(assigned(w) for w in workers), 60, "both workers to own partitions"
        )
        p.publish([line for line in example_lines() if line["topic"] == "messages"])
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
        assert answers[0] == answers[1]
        assert answers[0]["session_id"] == "sess-7f3a" and len(answers[0]["turns"]) == 4
    finally:
        p.close()

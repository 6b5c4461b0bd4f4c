"""``POST /v1/logs`` (SPEC §10): content types, gzip, the body limit, the token, and the
answer that waits for the broker's acknowledgement; the OpenTelemetry SDK's own OTLP/HTTP
exporter as the client."""

from __future__ import annotations

import asyncio
import gzip
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import aiohttp
import orjson
import pytest
from aiohttp import web
from pydantic import SecretStr

from stream_app.core.policy import Policy
from stream_app.ingest import otlp
from stream_app.ingest.telemetry import Translated, translate_value
from stream_app.worker.otlp_receiver import (
    JSON,
    PROTOBUF,
    OtlpReceiver,
    Refusal,
    check,
    gunzip,
    in_thread,
    status_body,
)
from tests.ingest.otlp_records import CLAUDE_RESOURCE, claude_api_request, claude_code, request

TOKEN = "t" * 32
BODY = request([claude_code(), claude_api_request()], CLAUDE_RESOURCE).SerializeToString()


def test_check_protobuf_json_and_gzip_give_one_record() -> None:
    as_json = otlp.encode_json(otlp.decode(BODY))
    for body, kind, coding in [
        (BODY, PROTOBUF, None),
        (as_json, JSON + "; charset=utf-8", "identity"),
        (gzip.compress(BODY), PROTOBUF, "gzip"),
        (gzip.compress(as_json), JSON, "GZIP"),
    ]:
        accepted = check(body, kind, coding, 1 << 20)
        assert accepted.record == BODY
        assert accepted.log_records == 2


_REFUSALS = {
    "not JSON": (b"{nope", JSON, None, 400, "not JSON"),
    "not protobuf": (b"\x0a\xff\xff\xff\xff\x0f", PROTOBUF, None, 400, "not an OTLP protobuf"),
    "text": (BODY, "text/plain", None, 415, "Content-Type must be"),
    "no type": (BODY, None, None, 415, "not 'none'"),
    "brotli": (BODY, PROTOBUF, "br", 415, "Content-Encoding"),
    "gzip, bad": (b"\x1f\x8bnot gzip at all", PROTOBUF, "gzip", 400, "not gzip"),
    "gzip, cut": (gzip.compress(BODY)[:-9], PROTOBUF, "gzip", 400, "not gzip"),
    "large": (b"x" * 101, PROTOBUF, None, 413, "100-byte limit"),
    "large gunzipped": (gzip.compress(b"x" * 101), PROTOBUF, "gzip", 413, "once gunzipped"),
}


@pytest.mark.parametrize("case", list(_REFUSALS))
def test_check_refuses(case: str) -> None:
    body, kind, coding, status, words = _REFUSALS[case]
    with pytest.raises(Refusal) as caught:
        check(body, kind, coding, 100 if status == 413 else 1 << 20)
    assert caught.value.status == status
    assert words in caught.value.reason


def test_a_gzip_bomb_is_413_without_unpacking_it() -> None:
    bomb = gzip.compress(b"\0" * (50 << 20))
    assert len(bomb) < 100_000
    with pytest.raises(Refusal) as caught:
        gunzip(bomb, 1 << 20)
    assert caught.value.status == 413


def test_status_body_in_both_encodings() -> None:
    assert orjson.loads(status_body(400, "bad", True)) == {"code": 3, "message": "bad"}
    assert status_body(400, "bad", False) == b"\x08\x03\x12\x03bad"


Sent = list[bytes]


@asynccontextmanager
async def serving(
    send: Callable[[bytes], Awaitable[object]], **options: object
) -> AsyncIterator[tuple[str, list[tuple[str, int]]]]:
    observed: list[tuple[str, int]] = []
    receiver = OtlpReceiver(send, observe=lambda o, n: observed.append((o, n)), **options)  # type: ignore[arg-type]
    app = web.Application()
    receiver.add_route(app)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}", observed
    finally:
        await runner.cleanup()


def test_answers_over_http() -> None:
    async def run() -> None:
        sent: Sent = []

        async def send(record: bytes) -> None:
            sent.append(record)

        async with (
            serving(send, token=SecretStr(TOKEN), max_body_bytes=1 << 16) as (url, observed),
            aiohttp.ClientSession() as http,
        ):
            auth = {"Authorization": f"Bearer {TOKEN}"}
            post = f"{url}/v1/logs"
            async with http.post(post, data=BODY, headers={"Content-Type": PROTOBUF}) as r:
                assert r.status == 401 and "Bearer" in r.headers["WWW-Authenticate"]
            headers = {**auth, "Content-Type": PROTOBUF}
            async with http.post(post, data=BODY, headers=headers) as r:
                assert r.status == 200 and await r.read() == b""
            headers = {**auth, "Content-Type": JSON, "Content-Encoding": "gzip"}
            body = gzip.compress(otlp.encode_json(otlp.decode(BODY)))
            async with http.post(post, data=body, headers=headers) as r:
                assert r.status == 200 and await r.json() == {}
            async with http.post(post, data=b"{x", headers={**auth, "Content-Type": JSON}) as r:
                assert r.status == 400
                assert "not JSON" in (await r.json())["message"]
            big = b"\0" * (1 << 17)
            async with http.post(post, data=big, headers={**auth, "Content-Type": JSON}) as r:
                assert r.status == 413
            async with http.get(post) as r:
                assert r.status == 405
            assert sent == [BODY, BODY]
            assert [o for o, _ in observed] == [
                "unauthorized",
                "accepted",
                "accepted",
                "invalid",
                "too_large",
            ]

    asyncio.run(run())


def test_503_until_the_broker_acknowledges() -> None:
    async def run() -> None:
        async def no_broker(record: bytes) -> None:
            raise ConnectionError("no broker")

        async def slow(record: bytes) -> None:
            await asyncio.sleep(10)

        for send in (no_broker, slow):
            async with serving(send, send_timeout=0.2) as (url, observed):
                async with (
                    aiohttp.ClientSession() as http,
                    http.post(f"{url}/v1/logs", data=BODY, headers={"Content-Type": PROTOBUF}) as r,
                ):
                    assert r.status == 503
                    assert r.headers["Retry-After"] == "2"
                assert observed == [("unavailable", 2)]

    asyncio.run(run())


def test_the_sdks_otlp_http_exporter_is_answered_and_its_records_translated() -> None:
    """The OpenTelemetry SDK's exporter (protobuf, gzip) sends Claude Code- and Codex-shaped
    events through a LoggerProvider; what reaches the topic translates to their decisions."""
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
    from opentelemetry.sdk.resources import Resource

    async def run() -> list[bytes]:
        sent: Sent = []

        async def send(record: bytes) -> None:
            sent.append(record)

        async with serving(send, token=SecretStr(TOKEN)) as (url, _):
            exporter = OTLPLogExporter(
                endpoint=f"{url}/v1/logs",
                headers={"Authorization": f"Bearer {TOKEN}"},
                compression=Compression.Gzip,
            )
            provider = LoggerProvider(resource=Resource.create({"service.name": "claude-code"}))
            provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
            logger = provider.get_logger("com.anthropic.claude_code.events")

            def emit() -> None:
                logger.emit(
                    body="claude_code.tool_decision",
                    attributes={
                        "event.name": "tool_decision",
                        "session.id": "sess-sdk",
                        "tool_use_id": "toolu_sdk",
                        "decision": "reject",
                        "source": "user_reject",
                        "event.timestamp": "2026-12-01T10:00:00.000Z",
                    },
                )
                logger.emit(
                    attributes={
                        "event.name": "codex.tool_decision",
                        "conversation.id": "conv-sdk",
                        "call_id": "call_sdk",
                        "decision": "approved",
                        "source": "config",
                    },
                    timestamp=0,
                )
                logger.emit(body="claude_code.api_request", attributes={"session.id": "sess-sdk"})
                provider.shutdown()

            await asyncio.to_thread(emit)
        return sent

    sent = asyncio.run(run())
    outcomes = [o for value in sent for o in translate_value(value, Policy("acme")).outcomes]
    decisions = [o.decision for o in outcomes if isinstance(o, Translated)]
    assert [(d["session_id"], d["call_id"], d["accepted"], d["explicit"]) for d in decisions] == [
        ("sess-sdk", "toolu_sdk", False, True),
        ("conv-sdk", "call_sdk", True, False),
    ]
    assert len(outcomes) == 3


def test_a_large_or_gzip_body_is_checked_off_the_event_loop(
    decode_threads: list[int],
) -> None:
    """Which thread decodes each body, not how long it takes: 200 log records of OTLP JSON
    (some 100 KiB, ~25 ms to decode), plain or gzip (which aiohttp unpacks a chunk at a time
    as it reads), are decoded in a thread; a small protobuf body on the event loop (a thread
    would cost it more than it saves); a body still gzip once read is unpacked in a thread."""
    big = request([claude_code(tool_use_id=f"toolu_{i}") for i in range(200)], CLAUDE_RESOURCE)
    large_json = otlp.encode_json(big)
    assert len(large_json) > 4 * 1024

    async def run() -> int:
        sent: Sent = []

        async def send(record: bytes) -> None:
            sent.append(record)

        async with serving(send) as (url, _), aiohttp.ClientSession() as http:
            for body, kind, coding in [
                (BODY, PROTOBUF, None),
                (large_json, JSON, None),
                (gzip.compress(large_json), JSON, "gzip"),
            ]:
                headers = {"Content-Type": kind, **({"Content-Encoding": coding} if coding else {})}
                async with http.post(f"{url}/v1/logs", data=body, headers=headers) as r:
                    assert r.status == 200
        assert sent == [BODY, big.SerializeToString(), big.SerializeToString()]
        return threading.get_ident()

    loop_thread = asyncio.run(run())
    small, large, gzipped = decode_threads
    assert small == loop_thread
    assert large != loop_thread and gzipped != loop_thread
    assert in_thread(gzip.compress(BODY), PROTOBUF, "gzip")
    assert not in_thread(gzip.compress(BODY), "text/plain", "gzip")

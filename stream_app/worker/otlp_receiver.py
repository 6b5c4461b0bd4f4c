"""``POST /v1/logs``: the OTLP/HTTP receiver on the worker's web port (SPEC §10), for teams
without an OpenTelemetry Collector.

A request's body is checked and written, as one record, to the telemetry topic, where the
telemetry agent translates it like a Collector's record; the answer waits for the broker:

- **200** (an empty ``ExportLogsServiceResponse``) only once the broker acknowledged the
  record: a worker that dies right after has lost nothing;
- **400** with a short reason for a body that is not an ``ExportLogsServiceRequest`` (an
  exporter does not retry it), **401** without the bearer token when
  ``STREAM_APP_WEB_TOKEN`` is set (as ``web_auth`` checks it), **413** for a body past the
  limit (as sent, and once gunzipped), **415** for another content type or encoding;
- **503** with ``Retry-After`` while the broker does not acknowledge (no broker, a timeout):
  OTLP exporters retry it, so nothing is dropped on the way.

Bodies are ``application/x-protobuf`` or ``application/json`` (OTLP JSON), plain or
``Content-Encoding: gzip`` (or ``deflate``, which the OTel SDK can send too). The record
written is the request in protobuf, whatever it came as: the form the Collector's
``otlp_proto`` writes, smaller than JSON, with fields this version does not know dropped.
The route does not wait for the worker's tables: it answers while they recover. A body
that would hold the event loop past a slice to check (OTLP JSON past 4 KiB, some 240 µs a
KiB to decode; protobuf past 256 KiB; any gzip) is checked in a thread (:func:`in_thread`).

An error's body is a ``google.rpc.Status`` (code and message) in the request's encoding, as
OTLP/HTTP says; a client that reads it not at all still has the status line.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

import orjson
from aiohttp import web
from pydantic import SecretStr

from stream_app.ingest import otlp
from stream_app.ingest.telemetry import decodes_in_thread
from stream_app.worker.web_auth import CHALLENGE, authorized

PATH: Final = "/v1/logs"
PROTOBUF: Final = "application/x-protobuf"
JSON: Final = "application/json"
# The default limit, as sent and as gunzipped: the record written must fit the broker's
# message limit (Kafka's default, about 1 MiB), or the producer refuses it for ever. The
# OTel SDK's batches (512 log records) stay well below.
MAX_BODY_BYTES: Final = 1024 * 1024
SEND_TIMEOUT: Final = 10.0  # seconds the broker has to acknowledge before a 503
RETRY_AFTER: Final = "2"  # seconds, on a 503
_CHUNK: Final = 64 * 1024
_CODINGS: Final = ("identity", "gzip", "deflate")
_GZIP_MAGIC: Final = b"\x1f\x8b"

# google.rpc.Code of each refusal, in the Status an error's body carries.
_RPC_CODE = {400: 3, 401: 16, 413: 8, 415: 3, 503: 14}


class Refusal(Exception):
    """A request refused: its HTTP status and a short reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Accepted:
    """A request's body as the telemetry topic's record, and how many log records it holds."""

    record: bytes
    log_records: int


def media_type(content_type: str | None) -> str:
    """``application/json; charset=utf-8`` as ``application/json``; "" for none."""
    return (content_type or "").partition(";")[0].strip().lower()


def check(
    body: bytes, content_type: str | None, content_encoding: str | None, limit: int
) -> Accepted:
    """The record to write for a request's body, or :class:`Refusal` (400, 413, 415)."""
    kind = media_type(content_type)
    if kind == PROTOBUF:
        encoding: otlp.Encoding = "otlp_proto"
    elif kind == JSON:
        encoding = "otlp_json"
    else:
        raise Refusal(415, f"Content-Type must be {PROTOBUF} or {JSON}, not {kind or 'none'!r}")
    if len(body) > limit:
        raise Refusal(413, f"body over the {limit}-byte limit")
    coding = (content_encoding or "identity").strip().lower()
    if coding not in _CODINGS:
        raise Refusal(415, f"Content-Encoding must be gzip, deflate or identity, not {coding!r}")
    # aiohttp's server unpacks gzip and deflate bodies as it reads them (auto_decompress):
    # a body that still starts with gzip's magic is unpacked here.
    if coding != "identity" and body[:2] == _GZIP_MAGIC:
        body = gunzip(body, limit)
    try:
        request = otlp.decode(body, encoding)
    except otlp.InvalidOtlp as exc:
        raise Refusal(400, str(exc)[:300]) from None
    count = sum(len(s.log_records) for rl in request.resource_logs for s in rl.scope_logs)
    return Accepted(request.SerializeToString(), count)


def in_thread(body: bytes, content_type: str | None, content_encoding: str | None) -> bool:
    """Whether :func:`check` runs in a thread for this body: one to gunzip (a small body
    may unpack to the limit), or one whose decoding would hold the event loop past a slice
    (``telemetry.decodes_in_thread``: OTLP JSON past 4 KiB, protobuf past 256 KiB)."""
    kind = media_type(content_type)
    if kind not in (PROTOBUF, JSON):
        return False  # refused (415) at once
    coding = (content_encoding or "identity").strip().lower()
    if coding != "identity" and body[:2] == _GZIP_MAGIC:
        return True
    return decodes_in_thread(body, "otlp_proto" if kind == PROTOBUF else "otlp_json")


def gunzip(body: bytes, limit: int) -> bytes:
    """A gzip body, never more than ``limit`` bytes of it (a small body may unpack to
    gigabytes): past it, 413; not gzip, 400."""
    unpacker = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = unpacker.decompress(body, limit + 1)
    except zlib.error as exc:
        raise Refusal(400, f"not gzip: {exc}") from None
    if len(out) > limit or unpacker.unconsumed_tail:
        raise Refusal(413, f"body over the {limit}-byte limit once gunzipped")
    if not unpacker.eof:
        raise Refusal(400, "not gzip: the stream ends early")
    return out


def status_body(status: int, reason: str, as_json: bool) -> bytes:
    """A ``google.rpc.Status`` with the reason: JSON, or protobuf (field 1 the code, field 2
    the message)."""
    code = _RPC_CODE.get(status, 2)
    if as_json:
        return orjson.dumps({"code": code, "message": reason})
    message = reason.encode()
    return bytes([0x08, code, 0x12]) + _varint(len(message)) + message


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


Send = Callable[[bytes], Awaitable[object]]
Observe = Callable[[str, int], None]  # an answer's outcome and the log records it held


class OtlpReceiver:
    """The ``POST /v1/logs`` handler. ``send`` writes a record to the telemetry topic and
    returns once the broker acknowledged it (it raises, or times out, when none does);
    ``observe`` is told each answer (``accepted``, ``invalid``, ``too_large``,
    ``unsupported``, ``unauthorized``, ``unavailable``) and its log records, for metrics."""

    def __init__(
        self,
        send: Send,
        *,
        token: SecretStr | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        send_timeout: float = SEND_TIMEOUT,
        observe: Observe | None = None,
    ) -> None:
        self._send = send
        self._token = None if token is None else token.get_secret_value()
        self.max_body_bytes = max_body_bytes
        self._send_timeout = send_timeout
        self._observe = observe or (lambda outcome, n: None)

    def add_route(self, app: web.Application, path: str = PATH) -> None:
        app.router.add_post(path, self.handle)

    async def handle(self, request: web.Request) -> web.Response:
        as_json = media_type(request.headers.get("Content-Type")) == JSON
        if self._token is not None and not authorized(request.headers, self._token):
            self._observe("unauthorized", 0)
            return _error(401, "this endpoint needs Authorization: Bearer <token>", as_json)
        try:
            body = await self._body(request)
            kind, coding = (
                request.headers.get("Content-Type"),
                request.headers.get("Content-Encoding"),
            )
            if in_thread(body, kind, coding):  # it would hold the event loop past a slice
                accepted = await asyncio.to_thread(check, body, kind, coding, self.max_body_bytes)
            else:
                accepted = check(body, kind, coding, self.max_body_bytes)
        except Refusal as refusal:
            self._observe(_OUTCOME[refusal.status], 0)
            return _error(refusal.status, refusal.reason, as_json)
        try:
            async with asyncio.timeout(self._send_timeout):
                await self._send(accepted.record)
        except Exception as exc:  # no broker, a timeout, a refusal: the client retries
            self._observe("unavailable", accepted.log_records)
            reason = f"the telemetry topic did not acknowledge: {type(exc).__name__}"
            return _error(503, reason, as_json, {"Retry-After": RETRY_AFTER})
        self._observe("accepted", accepted.log_records)
        if as_json:
            return web.Response(body=b"{}", content_type=JSON)
        return web.Response(body=b"", content_type=PROTOBUF)

    async def _body(self, request: web.Request) -> bytes:
        """The body, read no further than the limit (aiohttp's own limit is not relied on)."""
        limit = self.max_body_bytes
        if request.content_length is not None and request.content_length > limit:
            raise Refusal(413, f"body over the {limit}-byte limit")
        chunks: list[bytes] = []
        size = 0
        while chunk := await request.content.read(_CHUNK):
            size += len(chunk)
            if size > limit:
                raise Refusal(413, f"body over the {limit}-byte limit")
            chunks.append(chunk)
        return b"".join(chunks)


_OUTCOME = {400: "invalid", 401: "unauthorized", 413: "too_large", 415: "unsupported"}


def _error(
    status: int, reason: str, as_json: bool, headers: dict[str, str] | None = None
) -> web.Response:
    extra = dict(headers or {})
    if status == 401:
        extra.update(CHALLENGE)
    return web.Response(
        status=status,
        body=status_body(status, reason, as_json),
        content_type=JSON if as_json else PROTOBUF,
        headers=extra,
    )

"""The worker's web server: Faust's aiohttp driver, with limits on connections that do not
finish a request, so that nobody who holds connections open can keep the probes from an
answer (a liveness probe that goes unanswered restarts the pod).

aiohttp alone keeps a connection that sends nothing for an hour and takes as many as the
process has file descriptors; past them, ``/health`` goes unanswered. Here:

- a connection has ``HEADER_TIMEOUT`` seconds from opening to complete a request's headers,
  and after an answer ``KEEPALIVE_TIMEOUT`` seconds to complete the next one's (aiohttp's
  ``keepalive_timeout``); then it is closed. A request being served is never timed out.
- at most ``Limits.connections`` connections are open: a quarter of the open-file limit
  found at start-up (the rest is for Kafka, RocksDB and the like), never more than
  ``MAX_CONNECTIONS``. One more closes the connection that has waited longest for a
  request, never one being served (if all are, the new one is closed), so a probe always
  finds a place, whatever idle connections hold.
- a request aiohttp cannot parse (a header line past 8190 bytes, an invalid byte) is
  answered ``400 Bad Request`` with nothing of the request in it: aiohttp's own answer and
  its error log line quote the offending bytes, which may hold a token.

Both limits are logged once at start-up (``web_connections``). ``WEB`` is the ``web``
setting that makes Faust use this driver; :class:`Runner` serves the waiting probes of
``worker/reachability.py`` the same way.
"""

from __future__ import annotations

import asyncio
import resource
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache
from http import HTTPStatus
from typing import Any

from aiohttp import StreamReader, web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http import RawRequestMessage
from aiohttp.web_protocol import RequestHandler
from faust.types import AppT
from faust.web import drivers
from faust.web.drivers import aiohttp as faust_aiohttp

from stream_app.observability import logs

HEADER_TIMEOUT = 10.0  # seconds from opening to a request's complete headers
KEEPALIVE_TIMEOUT = 75.0  # seconds from an answer to the next request's complete headers
MAX_CONNECTIONS = 1024  # probes, scrapes and the other workers' forwarded lookups need few
MIN_CONNECTIONS = 4

#: Faust finds a web driver by the scheme of its ``web`` setting.
WEB = "stream-app://"
drivers.DRIVERS["stream-app"] = f"{__name__}:Web"

Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]
RequestFactory = Callable[
    [RawRequestMessage, StreamReader, RequestHandler, AbstractStreamWriter, "asyncio.Task[None]"],
    web.BaseRequest,
]


@dataclass(frozen=True)
class Limits:
    open_files: int  # the soft RLIMIT_NOFILE found (-1: unlimited)
    connections: int
    header_timeout: float = HEADER_TIMEOUT
    keepalive_timeout: float = KEEPALIVE_TIMEOUT

    @staticmethod
    def of(open_files: int) -> Limits:
        quarter = MAX_CONNECTIONS if open_files == resource.RLIM_INFINITY else open_files // 4
        return Limits(open_files, max(MIN_CONNECTIONS, min(MAX_CONNECTIONS, quarter)))


@cache
def limits() -> Limits:
    """The limits for this process, from its open-file limit; logged once."""
    found = Limits.of(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    logs.event(
        "web_connections",
        open_files=found.open_files,
        max_connections=found.connections,
        header_timeout_s=found.header_timeout,
        keepalive_timeout_s=found.keepalive_timeout,
    )
    return found


class Connection(RequestHandler):
    """aiohttp's protocol, whose answer to an unparsable request quotes nothing of it."""

    __slots__ = ()

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if status >= 500:  # a view's failure: aiohttp's answer quotes no request bytes
            return super().handle_error(request, status, exc, message)
        if request.writer.output_size > 0:  # as aiohttp: too late for another answer
            raise ConnectionError("an answer was already sent")
        # The client's mistake, not the worker's: no error line, and not the bytes.
        self.logger.debug("unparsable request refused (%s)", type(exc).__name__)
        refusal = web.Response(status=status, text=f"{status} {HTTPStatus(status).phrase}\n")
        refusal.force_close()
        return refusal


class Server(web.Server):
    """aiohttp's server, keeping the open connections within ``limits``.

    Connections waiting for a request (just opened, or answered and kept alive) are kept in
    the order they began to wait; a request takes its connection out of that line until
    its view has answered.
    """

    def __init__(
        self,
        handler: Handler,
        *,
        request_factory: RequestFactory,
        handler_cancellation: bool,
        limits: Limits,
        **options: Any,  # aiohttp's, for each connection's RequestHandler
    ) -> None:
        self.event_loop = asyncio.get_running_loop()
        self.limits = limits
        self.options = options  # what each connection's protocol is made with
        self.live: set[RequestHandler] = set()
        self.waiting: dict[RequestHandler, None] = {}  # the longest waiting first
        self.deadlines: dict[RequestHandler, asyncio.TimerHandle] = {}

        def started(
            message: RawRequestMessage,
            payload: StreamReader,
            protocol: RequestHandler,
            writer: AbstractStreamWriter,
            task: asyncio.Task[None],
        ) -> web.BaseRequest:
            self.serving(protocol)
            return request_factory(message, payload, protocol, writer, task)

        async def served(request: web.BaseRequest) -> web.StreamResponse:
            try:
                return await handler(request)
            finally:
                self.waits(request.protocol)

        super().__init__(
            served,
            request_factory=started,
            handler_cancellation=handler_cancellation,
            loop=self.event_loop,
            **options,
        )

    def __call__(self) -> RequestHandler:
        return Connection(self, loop=self.event_loop, **self.options)

    def connection_made(self, handler: RequestHandler, transport: asyncio.Transport) -> None:
        super().connection_made(handler, transport)
        self.live.add(handler)
        self.waiting[handler] = None
        self.deadlines[handler] = self.event_loop.call_later(
            self.limits.header_timeout, self.drop, handler
        )
        if len(self.live) > self.limits.connections:
            self.drop(next(iter(self.waiting)))  # the new one itself if all others are busy

    def connection_lost(self, handler: RequestHandler, exc: BaseException | None = None) -> None:
        super().connection_lost(handler, exc)
        self.forget(handler)

    def serving(self, handler: RequestHandler) -> None:
        """A request's headers are complete: out of the line until its view answered. The
        header timeout is for the first request; aiohttp's keep-alive times the next."""
        self.waiting.pop(handler, None)
        deadline = self.deadlines.pop(handler, None)
        if deadline is not None:
            deadline.cancel()

    def waits(self, handler: RequestHandler) -> None:
        if handler in self.live:
            self.waiting[handler] = None  # at the end of the line

    def drop(self, handler: RequestHandler) -> None:
        self.forget(handler)
        handler.force_close()

    def forget(self, handler: RequestHandler) -> None:
        self.serving(handler)
        self.live.discard(handler)


class Runner(web.AppRunner):
    """aiohttp's runner of an application, serving it through :class:`Server`."""

    async def _make_server(self) -> web.Server:
        made = await super()._make_server()  # the application started, and its handler
        found = limits()
        return Server(
            made.request_handler,
            request_factory=made.request_factory,
            handler_cancellation=made.handler_cancellation,
            limits=found,
            **{**made._kwargs, "keepalive_timeout": found.keepalive_timeout},
        )


class Web(faust_aiohttp.Web):
    """Faust's aiohttp driver, whose application runs through :class:`Runner`."""

    def __init__(self, app: AppT, **kwargs: object) -> None:
        super().__init__(app, **kwargs)
        self._runner = Runner(self.web_app, access_log=None)  # as Faust makes its own

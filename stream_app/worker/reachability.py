"""Whether the Kafka cluster answers: waited for at start-up, watched while running.

A worker started before its brokers (a cluster restart, a new namespace, a typo'd URL) must
not die with a traceback and be restarted in a loop by its supervisor: it waits, saying so in
one line per attempt, with a backoff of 0.5 s doubling up to 30 s, and answers ``/health``
200 and ``/ready`` 503 meanwhile, so an orchestrator sees a live pod that takes no traffic.
While it runs, the same question is asked every few seconds; ``/ready`` is 503 while the
cluster does not answer and 200 again once it does (the Kafka clients reconnect by
themselves).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping

from aiohttp import web
from aiokafka import AIOKafkaClient
from aiokafka.errors import KafkaError

from stream_app.observability import logs
from stream_app.worker import web_server

FIRST_BACKOFF = 0.5  # seconds before the second attempt, doubled before each next one
MAX_BACKOFF = 30.0
ATTEMPT_TIMEOUT = 10.0  # seconds one attempt may take
WATCH_INTERVAL = 5.0  # seconds between two questions while running
LOST_AFTER = 15.0  # seconds without an answer after which the cluster counts as unreachable


async def answers(bootstrap: str, options: Mapping[str, object], timeout: float) -> str | None:
    """None when the cluster answers a metadata request, else why not, in one line."""
    client = AIOKafkaClient(
        bootstrap_servers=bootstrap, request_timeout_ms=int(timeout * 1000), **options
    )
    try:
        async with asyncio.timeout(timeout):
            await client.bootstrap()
        return None
    except (TimeoutError, KafkaError, OSError) as exc:
        return str(exc) or type(exc).__name__
    finally:
        await client.close()


async def wait_for_broker(
    bootstrap: str, options: Mapping[str, object], bind: str, port: int
) -> int:
    """Returns once the cluster answers; the attempts it took. Serves the probes meanwhile."""
    client_log = logging.getLogger("aiokafka")
    level = client_log.level
    client_log.setLevel(logging.CRITICAL)  # it logs each refused connection: said once here
    try:
        return await _wait(bootstrap, options, bind, port)
    finally:
        client_log.setLevel(level)


async def _wait(bootstrap: str, options: Mapping[str, object], bind: str, port: int) -> int:
    attempt, backoff = 1, FIRST_BACKOFF
    why = await answers(bootstrap, options, ATTEMPT_TIMEOUT)
    if why is None:
        return attempt
    probes = await _serve_probes(bind, port)
    try:
        while why is not None:
            logs.event(
                "broker_unreachable",
                logging.WARNING,
                broker=bootstrap,
                attempt=attempt,
                retry_in_s=backoff,
                error=why,
            )
            await asyncio.sleep(backoff)
            attempt, backoff = attempt + 1, min(backoff * 2, MAX_BACKOFF)
            why = await answers(bootstrap, options, ATTEMPT_TIMEOUT)
    finally:
        if probes is not None:
            await probes.cleanup()
    logs.event("broker_reachable", broker=bootstrap, attempts=attempt)
    return attempt


class Watch:
    """The running worker's view of the cluster: asked every ``WATCH_INTERVAL`` seconds.

    Once the cluster counts as unreachable, each attempt that fails is one line, as while
    waiting at start-up: the Kafka clients' own lines about it are let through only once in
    a while (``logs.Repeats``), so these say how long it has lasted.
    """

    def __init__(self, bootstrap: str, options: Mapping[str, object]) -> None:
        self.bootstrap, self.options = bootstrap, options
        self.answered_at = time.monotonic()
        self.reachable = True
        self.attempts = 0  # failed since the cluster last answered

    async def check(self) -> None:
        why = await answers(self.bootstrap, self.options, ATTEMPT_TIMEOUT)
        now = time.monotonic()
        if why is None:
            self.answered_at = now
            if not self.reachable:
                logs.event("broker_reachable", broker=self.bootstrap, attempts=self.attempts)
            self.reachable, self.attempts = True, 0
            return
        self.attempts += 1
        if now - self.answered_at > LOST_AFTER:
            self.reachable = False
            logs.event(
                "broker_unreachable",
                logging.WARNING,
                broker=self.bootstrap,
                attempt=self.attempts,
                unreachable_for_s=round(now - self.answered_at, 1),
                error=why,
            )


async def _serve_probes(bind: str, port: int) -> web.AppRunner | None:
    """``/health`` 200 and everything else 503 until the worker's own web server starts."""

    async def health(request: web.Request) -> web.Response:
        return web.json_response({"status": "live"})

    async def not_ready(request: web.Request) -> web.Response:
        return web.json_response({"ready": False, "broker": "unreachable"}, status=503)

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_route("*", "/{tail:.*}", not_ready)
    runner = web_server.Runner(app, access_log=None)  # the worker's connection limits
    await runner.setup()
    try:
        await web.TCPSite(runner, bind, port).start()
    except OSError as exc:  # the port is taken: the wait goes on, unprobed
        logs.event("probes_unavailable", logging.WARNING, port=port, error=str(exc))
        await runner.cleanup()
        return None
    return runner

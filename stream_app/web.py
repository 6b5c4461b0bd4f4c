"""The worker's HTTP surface: liveness, readiness, Prometheus metrics, one session's state."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aiohttp
from aiohttp import web
from prometheus_client import generate_latest

from stream_app import metrics

if TYPE_CHECKING:
    from stream_app.app import Worker

METRICS_CONTENT_TYPE = "text/plain; version=0.0.4"
FORWARDED = "X-Stream-App-Forwarded"  # a forwarded question is answered, never forwarded again


def routes(worker: Worker) -> web.Application:
    async def health(request: web.Request) -> web.Response:
        """Live while the event loop answers."""
        return web.json_response({"status": "live"})

    async def ready(request: web.Request) -> web.Response:
        """Ready once this worker's partitions are assigned and their state recovered."""
        ok = worker.ready
        return web.json_response({"ready": ok}, status=200 if ok else 503)

    async def metrics_page(request: web.Request) -> web.Response:
        metrics.SESSIONS.set(len(worker.store))
        worker.lag()
        body = generate_latest(metrics.REGISTRY)
        return web.Response(body=body, headers={"Content-Type": METRICS_CONTENT_TYPE})

    async def session_state(request: web.Request) -> web.Response:
        """One session's state, answered by the worker that owns it, whichever is asked."""
        session_id = request.match_info["session_id"]
        partition = worker.store.partition_of(session_id)
        owner = worker.owners.of(partition)
        if (
            not worker.store.owns(partition)
            and owner is not None
            and owner != worker.owners.address
            and FORWARDED not in request.headers
        ):
            async with (
                aiohttp.ClientSession() as client,
                client.get(f"{owner}/sessions/{session_id}", headers={FORWARDED: "1"}) as r,
            ):
                return web.Response(
                    body=await r.read(), status=r.status, content_type="application/json"
                )
        state = worker.store.get(session_id)
        if state is None:
            return web.json_response({"error": f"no state for session {session_id!r}"}, status=404)
        return web.Response(body=state.to_json(), content_type="application/json")

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/ready", ready)
    app.router.add_get("/metrics", metrics_page)
    app.router.add_get("/sessions/{session_id}", session_state)
    return app


async def serve(worker: Worker) -> web.AppRunner:
    runner = web.AppRunner(routes(worker), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "0.0.0.0", worker.settings.web_port)  # every interface: a service
    await site.start()
    return runner

"""The bearer token that guards the worker's views of chat content (``STREAM_APP_WEB_TOKEN``).

``/sessions/{id}`` answers with a session's pending messages and open turns: chat content.
The web port must stay reachable from the other workers (they forward that view to the
session's owner) and from probes and scrapers, so it cannot simply be bound to loopback;
the token is what keeps the content to those who hold it. ``/health``, ``/ready`` and
``/metrics`` carry none and stay open.

Faust's table routing forwards a request with its headers, so the owner checks the same
token again; the check runs before the routing, so a request without it is refused by the
first worker and never forwarded.

Faust's own views (``/router/...``: which worker holds which partition, at what URL) are
a map of the cluster for whoever asks; :func:`guard_faust_views` puts them behind the same
token. Faust registers them from its blueprints only when the web server starts, after the
project's pages, so they are guarded by an aiohttp middleware that looks the view up.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Mapping
from functools import wraps

import faust
from aiohttp import web as aiohttp_web
from faust.web import Request, Response, View
from pydantic import SecretStr

Handler = Callable[..., Awaitable[Response]]  # a view function, with its route's arguments
CHALLENGE = {"WWW-Authenticate": 'Bearer realm="stream-app"'}
REFUSAL = {"error": "this view needs Authorization: Bearer <STREAM_APP_WEB_TOKEN>"}
# The modules of Faust's built-in blueprints whose views tell about the cluster or its
# tables. ``production_index`` (``/``, ``{"status": "OK"}``) tells nothing and stays open.
FAUST_VIEW_MODULES = (
    "faust.web.apps.router",
    "faust.web.apps.tables",
    "faust.web.apps.graph",
    "faust.web.apps.stats",
    "faust.web.apps.metrics",
)


def _bytes(text: str) -> bytes:
    """A header's text as bytes, never an error: aiohttp decodes a header's bytes as UTF-8
    with ``surrogateescape``, so non-ASCII or undecodable bytes arrive as characters
    that ``str.encode()`` refuses and ``hmac.compare_digest`` will not take in a ``str``."""
    return text.encode("utf-8", "surrogatepass")


def authorized(headers: Mapping[str, str], token: str) -> bool:
    """Whether ``headers`` carry ``Authorization: Bearer <token>``.

    The scheme's case does not matter (RFC 7235); the token is compared in constant time,
    so the time an answer takes does not tell how much of a guess was right. Whatever the
    header holds (no scheme, bytes of any encoding, nothing), the answer is a bool.
    """
    value = headers.get("Authorization")
    if not isinstance(value, str):
        return False
    scheme, _, given = value.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(_bytes(given.strip()), _bytes(token))


def requires_token(token: SecretStr | None) -> Callable[[Handler], Handler]:
    """A view decorator: 401 unless the request carries the token; nothing when none is set."""

    def decorate(handler: Handler) -> Handler:
        if token is None:
            return handler
        secret = token.get_secret_value()

        @wraps(handler)
        async def guarded(
            view: View, request: Request, *args: object, **kwargs: object
        ) -> Response:
            if not authorized(request.headers, secret):
                return view.json(REFUSAL, status=401, headers=dict(CHALLENGE))
            return await handler(view, request, *args, **kwargs)

        return guarded

    return decorate


def guard_faust_views(app: faust.App, token: SecretStr | None) -> None:
    """Make Faust's built-in views (``/router/`` and the like) need the token too.

    Call it once the app is made and before its web server starts; nothing when no token
    is set. A project page (``/sessions/{id}``, the probes) is never touched: its own
    decorator decides. A request that matches no view goes on to aiohttp's 404.
    """
    if token is None:
        return
    secret = token.get_secret_value()
    web = app.web
    web_app = getattr(web, "web_app", None)
    if not isinstance(web_app, aiohttp_web.Application):
        raise TypeError(f"the token guard needs Faust's aiohttp web driver, not {web!r}")
    guarded: frozenset[str] | None = None

    def faust_view(path: str) -> bool:
        nonlocal guarded
        if guarded is None:  # the views exist once the server started, and stay as they are
            guarded = frozenset(
                p for p, v in web.views.items() if type(v).__module__.startswith(FAUST_VIEW_MODULES)
            )
        return path in guarded

    @aiohttp_web.middleware
    async def require_token(
        request: aiohttp_web.Request,
        handler: Callable[[aiohttp_web.Request], Awaitable[aiohttp_web.StreamResponse]],
    ) -> aiohttp_web.StreamResponse:
        resource = request.match_info.route.resource
        if (
            resource is not None
            and faust_view(resource.canonical)
            and not authorized(request.headers, secret)
        ):
            return aiohttp_web.json_response(REFUSAL, status=401, headers=CHALLENGE)
        return await handler(request)

    web_app.middlewares.append(require_token)

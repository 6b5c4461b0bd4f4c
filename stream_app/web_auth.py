"""The bearer token that guards the worker's views of chat content (``STREAM_APP_WEB_TOKEN``).

``/sessions/{id}`` answers with a session's pending messages and open turns: chat content.
The web port must stay reachable from the other workers (they forward that view to the
session's owner) and from probes and scrapers, so it cannot simply be bound to loopback;
the token is what keeps the content to those who hold it. ``/health``, ``/ready`` and
``/metrics`` carry none and stay open.

Faust's table routing forwards a request with its headers, so the owner checks the same
token again; the check runs before the routing, so a request without it is refused by the
first worker and never forwarded.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Mapping
from functools import wraps
from typing import Any

from pydantic import SecretStr

Handler = Callable[..., Awaitable[Any]]
CHALLENGE = {"WWW-Authenticate": 'Bearer realm="stream-app"'}


def authorized(headers: Mapping[str, str], token: str) -> bool:
    """Whether ``headers`` carry ``Authorization: Bearer <token>``.

    The scheme's case does not matter (RFC 7235); the token is compared in constant time,
    so the time an answer takes does not tell how much of a guess was right.
    """
    scheme, _, given = headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


def requires_token(token: SecretStr | None) -> Callable[[Handler], Handler]:
    """A view decorator: 401 unless the request carries the token; nothing when none is set."""

    def decorate(handler: Handler) -> Handler:
        if token is None:
            return handler
        secret = token.get_secret_value()

        @wraps(handler)
        async def guarded(view: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
            if not authorized(request.headers, secret):
                return view.json(
                    {"error": "this view needs Authorization: Bearer <STREAM_APP_WEB_TOKEN>"},
                    status=401,
                    headers=dict(CHALLENGE),
                )
            return await handler(view, request, *args, **kwargs)

        return guarded

    return decorate

"""`ALLOWED_HOSTS` on every HTTP route, before anything reads the body (`serving.hosts` says why).

The admin and the docs run Django's full stack, which checks the Host only where a view calls `get_host()`;
the JSON API runs the lean handler, which calls it nowhere. One check in front of both answers a host that is
not allowed with a 400 in the route's error shape (System One's, OpenAI's on `/v1/decisions`, SGLang's on
`/v1/classify`, the plain `detail` shape of Django's own 400 elsewhere), the host never echoed back. The health
checks answer any host (`serving.hosts.HOST_FREE_PATHS`).
"""

from __future__ import annotations

from django.conf import settings

from api.plumbing.request_body import error_response_send
from openjev_site.api_handler import path_unprefixed
from serving.asgi_types import ASGIApp, Receive, Scope, Send
from serving.hosts import HOST_FREE_PATHS, host_allowed, scope_host

HOST_REFUSED = "the Host header names a host this server does not answer for (OPENJEV_ALLOWED_HOSTS)"
HOSTS_MANY = "the request has more than one Host header (RFC 9112 makes that a 400)"


def scope_host_refusal(*, scope: Scope) -> str | None:
    """Why the request's host is refused, or None: more than one Host header anywhere (Django would join them
    into a host no rule matches, and raise DisallowedHost, a 500, wherever a view asked for the host), else a host
    `ALLOWED_HOSTS` does not name, except on the paths the health checks answer on any host."""
    if sum(1 for name, _ in scope.get("headers", ()) if name == b"host") > 1:
        return HOSTS_MANY
    if path_unprefixed(scope, script_name=settings.FORCE_SCRIPT_NAME) in HOST_FREE_PATHS:
        return None
    if host_allowed(host=scope_host(headers=scope.get("headers", ()), server=scope.get("server"))):
        return None
    return HOST_REFUSED


def scope_host_allowed(*, scope: Scope) -> bool:
    return scope_host_refusal(scope=scope) is None


class HostCheck:
    """Refuses an HTTP request whose host `ALLOWED_HOSTS` does not name, with a 400 (`invalid_host`)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = scope_host_refusal(scope=scope) if scope["type"] == "http" else None
        if refusal is not None:
            await error_response_send(send, 400, "invalid_host", refusal, scope=scope)
            return
        await self.app(scope, receive, send)

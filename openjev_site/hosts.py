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
from api.requestids import ASGIApp, Receive, Scope, Send
from openjev_site.api_handler import path_unprefixed
from serving.hosts import HOST_FREE_PATHS, host_allowed, scope_host

HOST_REFUSED = "the Host header names a host this server does not answer for (OPENJEV_ALLOWED_HOSTS)"


def scope_host_allowed(*, scope: Scope) -> bool:
    """Whether the request's host is allowed, or its path is one the health checks answer on any host."""
    if path_unprefixed(scope, script_name=settings.FORCE_SCRIPT_NAME) in HOST_FREE_PATHS:
        return True
    return host_allowed(host=scope_host(headers=scope.get("headers", ()), server=scope.get("server")))


class HostCheck:
    """Refuses an HTTP request whose host `ALLOWED_HOSTS` does not name, with a 400 (`invalid_host`)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope_host_allowed(scope=scope):
            await error_response_send(send, 400, "invalid_host", HOST_REFUSED, scope=scope)
            return
        await self.app(scope, receive, send)

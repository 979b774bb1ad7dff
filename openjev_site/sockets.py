"""WebSocket routes: the System One stream and the admin dashboard's live feed.

They sit under the same path prefix as the HTTP routes (the ASGI root path, or
`OPENJEV_FORCE_SCRIPT_NAME` when a gateway mounts the service under a path and cannot pass one), so a
client that reaches `/jev/v1/systemone` reaches `/jev/v1/systemone/stream` too. Only the dashboard
socket gets channels' session and auth middleware (it authenticates by the admin's session cookie);
the stream authenticates by API key, like the HTTP API. Any other path is accepted and closed at
once with 4404 and the reason, which a client can read (a refused handshake shows only "403").

At most `OPENJEV_MAX_WEBSOCKETS` API sockets (the stream, and paths without a route) are open in the process
at once; one more is accepted and closed at once with 4529 (the API's 529: this server is full, retry later),
so a flood of sockets costs the process a bounded number of file descriptors and tasks. The admin
dashboard's live sockets are counted apart, up to `DASHBOARD_MAX_WEBSOCKETS`, so API sockets can never take
the administrators' view of the flood away (and a flood on the dashboard's path, refused there at once
without a staff session, never takes the API's room). A socket whose Host `ALLOWED_HOSTS` does not name (DNS
rebinding) is closed at once with 4400, on every route, as HTTP answers 400.
"""

from __future__ import annotations

from typing import Any, cast

from channels.auth import AuthMiddlewareStack
from channels.routing import URLRouter
from django.conf import settings
from django.urls import path, re_path

from api.systemone.stream import SystemOneStreamConsumer
from api.systemone.stream_protocol import CLOSE_REASON_MAX_CHARACTERS
from audit.dashboard_live import DashboardConsumer
from openjev_site.api_handler import path_unprefixed
from openjev_site.hosts import HOST_REFUSED, scope_host_allowed
from serving import metrics
from serving.asgi_types import ASGIApp, Receive, Scope, Send

STREAM_PATH = "v1/systemone/stream"
DASHBOARD_LIVE_PATH = "admin/evaluations/evaluation/dashboard/live"
CLOSE_HOST_REFUSED = 4400
CLOSE_NOT_FOUND = 4404
CLOSE_SERVER_FULL = 4529
DASHBOARD_MAX_WEBSOCKETS = 50
"""Dashboard sockets open at once in one process: a few administrators' tabs, with room to spare."""


async def socket_refuse(*, receive: Receive, send: Send, code: int, reason: str) -> None:
    """Accept the handshake, then close with `code` and `reason`, which a client can read (a refused
    handshake shows only "403")."""
    message = await receive()
    if message["type"] == "websocket.connect":
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.close", "code": code, "reason": reason[:CLOSE_REASON_MAX_CHARACTERS]})


async def route_missing(scope: Scope, receive: Receive, send: Send) -> None:
    await socket_refuse(
        receive=receive, send=send, code=CLOSE_NOT_FOUND, reason=f"no WebSocket route for {scope['path']}"
    )


def socket_pool_of(*, scope: Scope) -> str:
    """Which count a socket is held in: `dashboard` for the admin dashboard's live feed, `api` for the rest."""
    dashboard = path_unprefixed(scope, script_name=settings.FORCE_SCRIPT_NAME) == f"/{DASHBOARD_LIVE_PATH}"
    return "dashboard" if dashboard else "api"


def socket_pool_limit(*, pool: str) -> int:
    return DASHBOARD_MAX_WEBSOCKETS if pool == "dashboard" else settings.OPENJEV.max_websockets


class SocketCap:
    """At most `OPENJEV_MAX_WEBSOCKETS` API sockets and `DASHBOARD_MAX_WEBSOCKETS` dashboard sockets open in
    this process; each is counted until its application returns (the connection is closed)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.open: dict[str, int] = {"api": 0, "dashboard": 0}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        pool = socket_pool_of(scope=scope)
        limit = socket_pool_limit(pool=pool)
        if self.open[pool] >= limit:
            metrics.overloaded_total.labels("websockets").inc()
            await socket_refuse(
                receive=receive,
                send=send,
                code=CLOSE_SERVER_FULL,
                reason=f"this server process has {limit} WebSockets open; retry later",
            )
            return
        self.open[pool] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.open[pool] -= 1


class SocketHostCheck:
    """Closes a socket whose Host `ALLOWED_HOSTS` does not name with 4400, before any route sees it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not scope_host_allowed(scope=scope):
            await socket_refuse(receive=receive, send=send, code=CLOSE_HOST_REFUSED, reason=HOST_REFUSED)
            return
        await self.app(scope, receive, send)


class ScriptPrefix:
    """Routes on the path below the prefix, as the HTTP side does (`path_is_api`): channels' URLRouter
    reads `path_remaining` when it is set, and otherwise knows only the ASGI root path."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        remaining = path_unprefixed(scope, script_name=settings.FORCE_SCRIPT_NAME)
        await self.app({**scope, "path_remaining": remaining}, receive, send)


def websocket_application() -> Any:
    return SocketCap(
        SocketHostCheck(
            ScriptPrefix(
                URLRouter(
                    [
                        path(STREAM_PATH, SystemOneStreamConsumer.as_asgi()),
                        path(DASHBOARD_LIVE_PATH, AuthMiddlewareStack(DashboardConsumer.as_asgi())),
                        re_path(r"", cast(Any, route_missing)),  # django-stubs type route targets as views
                    ]
                )
            )
        )
    )

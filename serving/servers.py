"""The in-process ASGI servers `serve` runs the API under, and the signals that stop them.

uvicorn by default (`bench/server.py` measured it ahead of daphne on the API's workloads, see
docs/operations.md); daphne is supported. Both run in the serving process, so signals, exit statuses
and the evaluator are all in one place.
"""

from __future__ import annotations

import logging
import signal
import threading
from dataclasses import dataclass
from types import FrameType
from typing import Any, Literal, Protocol

from serving.header_timeout import http_protocol_with_header_timeout
from serving.workers import reuse_port_socket

log = logging.getLogger("openjev.serve")

ServerKind = Literal["uvicorn", "daphne"]
SERVERS: tuple[ServerKind, ...] = ("uvicorn", "daphne")
DEFAULT_SERVER: ServerKind = "uvicorn"


class ServerFailed(Exception):
    """The server could not serve (its port is taken)."""


class Server(Protocol):
    def run(self) -> None:
        """Serve until stopped; returns after a graceful shutdown."""
        ...

    def stop(self) -> None:
        """Ask the server to shut down; safe from any thread, before or during `run`."""
        ...


@dataclass(frozen=True)
class ServerOptions:
    host: str
    port: int
    drain: float
    """Seconds in-flight requests get to finish on shutdown."""
    keep_alive: int
    access_log: bool
    header_timeout: float
    """Seconds a connection has to deliver a request's headers (uvicorn; daphne times out per read)."""
    header_timeout_body: bytes
    """The 408 body sent when the headers are late, in the API's error shape."""
    websocket_max_bytes: int
    """The largest WebSocket message the server takes (daphne's own default, 1 MiB, is under the body limit)."""
    reuse_port: bool = False
    """Bind with SO_REUSEPORT, beside the other workers of `serve --workers N` (uvicorn)."""


class _Uvicorn:
    def __init__(self, *, app: Any, options: ServerOptions) -> None:
        import uvicorn

        # log_config=None: keep the process's logging; lifespan off: the app is ready before serving.
        config = uvicorn.Config(
            app,
            host=options.host,
            port=options.port,
            lifespan="off",
            log_config=None,
            access_log=options.access_log,
            timeout_graceful_shutdown=max(1, round(options.drain)),
            timeout_keep_alive=options.keep_alive,
            server_header=False,
            # The application resolves the client from trusted proxies itself (serving.addresses: the same rule
            # under either server); uvicorn's own would trust loopback (FORWARDED_ALLOW_IPS) and any string.
            proxy_headers=False,
            forwarded_allow_ips="",
            http=http_protocol_with_header_timeout(seconds=options.header_timeout, body=options.header_timeout_body),
            ws_max_size=options.websocket_max_bytes,
            # No permessage-deflate: a message then costs what was sent, as a body's compression is bounded by its
            # size (`api.plumbing.content_encoding`); 2 KB of deflate were two megabytes of JSON to read (daphne's
            # autobahn offers no compression unless asked).
            ws_per_message_deflate=False,
        )
        self._server = uvicorn.Server(config)
        self._options = options

    def run(self) -> None:
        if not self._options.reuse_port:
            self._server.run()
            return
        try:
            sock = reuse_port_socket(host=self._options.host, port=self._options.port)
        except OSError as exc:
            raise ServerFailed(f"cannot listen on {self._options.host}:{self._options.port}: {exc}") from None
        with sock:
            self._server.run(sockets=[sock])

    def stop(self) -> None:
        self._server.should_exit = True


class _Daphne:
    def __init__(self, *, app: Any, options: ServerOptions) -> None:
        from daphne.endpoints import build_endpoint_description_strings
        from daphne.server import Server as DaphneServer

        endpoints = build_endpoint_description_strings(host=options.host, port=options.port)
        self._server = DaphneServer(
            application=app,
            endpoints=endpoints,
            signal_handlers=True,
            application_close_timeout=options.drain,
            action_logger=_daphne_access_log if options.access_log else None,
            verbosity=1,
            websocket_max_message_size=options.websocket_max_bytes,
            websocket_max_frame_size=options.websocket_max_bytes,
            # daphne's own X-Forwarded-For reading believes any peer and the leftmost entry: off, the
            # application resolves the client (serving.addresses).
            proxy_forwarded_address_header=None,
        )

    def run(self) -> None:
        self._server.run()
        if not self._server.listening_addresses and not self._server.abort_start:
            raise ServerFailed("daphne could not listen (is the port already in use?)")

    def stop(self) -> None:
        from twisted.internet import reactor

        reactor.callFromThread(self._server.stop)  # type: ignore[attr-defined]


def _daphne_access_log(protocol: str, action: str, details: dict[str, Any]) -> None:
    """One line per HTTP request and per WebSocket step (the site's log filter redacts their query strings)."""
    if protocol == "websocket":
        log.info("%s WebSocket %s %s", details.get("client"), details.get("path"), action)
    else:
        log.info(
            "%s %s %s %s", details.get("client"), details.get("method"), details.get("path"), details.get("status")
        )


def server_create(*, kind: ServerKind, app: Any, options: ServerOptions) -> Server:
    """The in-process ASGI server of `kind` around `app`."""
    return (_Daphne if kind == "daphne" else _Uvicorn)(app=app, options=options)


class StopSignal:
    """SIGTERM/SIGINT outside the ASGI server's own handlers: during startup they cancel the wait,
    once a server exists they stop it (closing the gap before the server installs its handlers)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.server: Server | None = None
        self.stopping = False
        """Set once this process stops its child itself: the child's exit is then expected, not a failure."""

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.event.set()
        if self.server is not None:
            self.server.stop()

"""uvicorn's httptools protocol with a deadline for a request's headers.

uvicorn (0.54) times a connection out only while it idles between requests (`timeout_keep_alive`,
armed after a response): a client that connects and sends nothing, or half its headers, keeps the
connection for ever, and enough of them exhaust the process's sockets. Here the headers must be
complete within `header_timeout` seconds of the connection opening, or of the first byte of the
next request on a kept-alive connection; otherwise the answer is 408 and the connection is closed.
The body has its own deadline in the body reader (`api.plumbing.request_body`), which also covers daphne.

httptools (C) rather than h11 (pure Python): h11's parsing and event bookkeeping were most of the
request cycle outside our own code in the server's CPU profile.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger(__name__)

_TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"content-length: %d\r\n\r\n%s"
)


class _HeaderDeadlineProtocol(HttpToolsProtocol):
    header_timeout: ClassVar[float]
    timeout_body: ClassVar[bytes]
    _header_deadline: asyncio.TimerHandle | None = None
    _headers_pending = True
    """A request's headers are awaited: from the connection's start, and from a request's first byte."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_deadline_arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._headers_pending = True
        self._header_deadline_arm()

    def on_headers_complete(self) -> None:
        self._headers_pending = False
        self._header_deadline_cancel()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._header_deadline_cancel()
        super().connection_lost(exc)

    def _header_deadline_arm(self) -> None:
        if self._header_deadline is None and not self.transport.is_closing():
            self._header_deadline = self.loop.call_later(self.header_timeout, self._header_deadline_expired)

    def _header_deadline_cancel(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _header_deadline_expired(self) -> None:
        self._header_deadline = None
        if not self._headers_pending or self.transport.is_closing():
            return
        log.info(
            "closing a connection from %s: no complete request headers within %g s", self.client, self.header_timeout
        )
        self.transport.write(_TIMEOUT_RESPONSE % (len(self.timeout_body), self.timeout_body))
        self.transport.close()


def http_protocol_with_header_timeout(*, seconds: float, body: bytes) -> type[Any]:
    """The protocol class for `uvicorn.Config(http=...)` (uvicorn builds one per connection); `body` is
    the 408's JSON, rendered by the app in its error shape."""
    return type(
        "HeaderDeadlineHttpToolsProtocol", (_HeaderDeadlineProtocol,), {"header_timeout": seconds, "timeout_body": body}
    )

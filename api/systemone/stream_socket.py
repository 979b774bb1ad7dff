"""What every stream socket holds, whatever it is doing: its state, the ordered outbox its messages leave by, the
idle watchdog, and how it closes. Authentication (`api/systemone/stream_auth.py`) and the evaluations
(`api/systemone/stream_evaluations.py`) build on it, and `api/systemone/stream.py` puts them together as the
consumer, so each reads the same state and closes the socket the same way.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels.consumer import get_handler_name
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from api.plumbing.json_render import text_encode
from api.systemone.stream_protocol import CLOSE_IDLE, CLOSE_REASON_MAX_CHARACTERS
from audit.callers import Caller

log = logging.getLogger(__name__)

NO_CHANNEL_LAYER = "openjev-stream-none"
"""A layer alias that is never configured: a stream socket answers only its own client, so it needs no
channel of its own in the layer (with Redis, each channel would be one more blocking reader)."""

releasing: set[asyncio.Task[None]] = set()
"""Tasks that end what a socket leaves behind (an admission given back, a socket closed), held until they end."""


class StreamSocket(AsyncJsonWebsocketConsumer):
    """One socket's state, its ordered outbox and its idle watchdog."""

    channel_layer_alias = NO_CHANNEL_LAYER

    share: str | None
    """The subject this socket is counted for: its client's address, then the key it authenticated with."""
    address: str | None
    """The client's address (`serving.addresses`: through trusted proxies), as the HTTP API counts it."""
    caller: Caller | None
    authenticated: bool
    in_flight: dict[str, asyncio.Task[None]]
    cancelled: set[str]
    outbox: asyncio.Queue[dict[str, Any] | None]
    closing: bool
    last_activity: float
    settled: asyncio.Event
    """Set whenever an evaluation ends, so the idle watchdog looks again."""
    writer: asyncio.Task[None]

    async def dispatch(self, message: dict[str, Any]) -> None:
        """channels' dispatch without its per-message thread hop to close stale database connections:
        nothing here uses the ORM on the event loop (key lookups run in their own thread)."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"no handler for message type {message['type']}")
        await handler(message)

    # -- writing, idleness, closing ---------------------------------------------------------------

    def _send_soon(self, message: dict[str, Any]) -> None:
        """Messages leave in the order they are queued: an evaluation's answers before its `done`."""
        if not self.closing:
            self.outbox.put_nowait(message)

    async def _write(self) -> None:
        try:
            while (message := await self.outbox.get()) is not None:
                await self.send_json(message)
        except Exception as exc:  # the connection broke under a send: the disconnect follows
            log.info("stream socket: sending failed (%r); dropping the rest", exc)

    async def _watch_idle(self) -> None:
        """Close a socket that has been silent, with nothing in flight, for the idle timeout."""
        timeout = settings.OPENJEV.stream_idle_timeout
        loop = asyncio.get_running_loop()
        while True:
            idle = loop.time() - self.last_activity
            if idle >= timeout and not self.in_flight:
                await self._close(code=CLOSE_IDLE, reason=f"idle for {timeout:g} s")
                return
            self.settled.clear()
            try:
                async with asyncio.timeout(None if self.in_flight else timeout - idle):
                    await self.settled.wait()
            except TimeoutError:
                pass

    async def _close(self, *, code: int, reason: str) -> None:
        """Send what is queued, then close with `code`; the client's close frame ends the consumer."""
        if self.closing:
            return
        self.closing = True
        for task in self.in_flight.values():
            task.cancel()
        self.outbox.put_nowait(None)
        await self.writer
        await self.close(code=code, reason=reason[:CLOSE_REASON_MAX_CHARACTERS])

    @classmethod
    async def encode_json(cls, content: Any) -> str:
        return text_encode(value=content)

"""ASGI wrapper that enforces the body limit and decodes `Content-Encoding` before Django runs.

The limit is checked while the body streams in (413 as soon as it is exceeded, not after buffering
everything), and a compressed body is decoded with its output capped at the same limit and at what its size
allows (`api.plumbing.content_encoding`), so a compression bomb costs at most `max_bytes` of memory and a few
bytes sent cannot become two megabytes to read. The official SDK compresses bodies of 1 KiB and more with zstd,
so decoding is not optional.

Every method goes through the same checks: Django reads (and spools to disk) any body before it
routes, so a GET or DELETE body that skipped the reader could be a gigabyte read before the 405. The
whole body must also arrive within `read_timeout` seconds, or the answer is 408 and the connection
is closed: a client that stalls mid-body must not hold a connection and its buffer for ever (the
ASGI servers have no body timeout of their own; `serve` sets the header timeout).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable

from api.plumbing.api_error import ApiError
from api.plumbing.body_lane import body_lane_run
from api.plumbing.body_lane_places import LanePlace, lane_place_hold, place_return
from api.plumbing.content_encoding import DECODERS, BodyTooLarge, BodyUndecodable, body_decode
from api.plumbing.error_responses import error_body, shape_of_path
from api.plumbing.json_render import body_encode
from inference.errors import Overloaded, value_quoted
from serving.asgi_types import ASGIApp, Message, Receive, Scope, Send


async def error_response_send(send: Send, status: int, error_type: str, message: str, *, scope: Scope) -> None:
    """The error in its route's shape, from `api.plumbing.error_responses` like every other error of the API."""
    error = ApiError(status, error_type, message)
    names = {name.decode("latin-1").lower() for name, _ in scope.get("headers", ())}
    shape = shape_of_path(str(scope.get("path", "")), has_header=names.__contains__)
    body = body_encode(body=error_body(error, shape=shape))
    status = shape.status(error)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        *(
            (name.encode(), value.encode())
            for name, value in shape.headers_sent(shape.headers(error, status=status)).items()
        ),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


STREAMED_DEADLINE_FACTOR = 10
"""A streamed body has this many times `read_timeout` in all (10 minutes by default), and `read_timeout` between
any two of its chunks."""


class RequestBodyReader:
    """Reads the whole body before Django does: limit, decoding and deadline (see the module).

    `room_of` may grant a request a larger limit (a batch file upload, `api.batches.uploads`): such a body is not
    read into memory but streamed to Django, which spills it to a temporary file, and cut off with a 413 (or a
    408) as soon as it is over; Django then sees a disconnect and answers nothing more.

    `place_of` gives a large body its place in the body lane before the body is received, waiting for one unread
    when its caller's share is taken (`api.plumbing.body_lane_admission`); the request holds it until its body is
    parsed or it ends, and a request that waited too long is a 529."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_bytes: int,
        read_timeout: float,
        room_of: Callable[[Scope], Awaitable[int | None]] | None = None,
        place_of: Callable[[Scope], Awaitable[LanePlace | None]] | None = None,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.read_timeout = read_timeout
        self.room_of = room_of
        self.place_of = place_of

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = scope["headers"]
        encoding, length = "identity", None
        for name, value in headers:
            if name == b"content-encoding":
                encoding = value.decode("latin-1").strip().lower() or "identity"
            elif name == b"content-length":
                length = value
        if encoding not in DECODERS:
            await error_response_send(
                send,
                415,
                "unsupported_media_type",
                f"Content-Encoding {value_quoted(encoding)} is not supported; use gzip, zstd or none",
                scope=scope,
            )
            return
        room = await self.room_of(scope) if self.room_of is not None else None
        limit = self.max_bytes if room is None else room
        if length is not None and length.isdigit() and int(length) > limit:
            await error_response_send(send, 413, "request_too_large", f"the body is over {limit} bytes", scope=scope)
            return
        if room is not None:
            await self.app(scope, self._streamed(receive, send, scope=scope, limit=room), send)
            return
        try:
            place = await self.place_of(scope) if self.place_of is not None else None
        except Overloaded as exc:
            await error_response_send(send, *self._refusal(exc), scope=scope)
            return
        lane_place_hold(place)
        try:
            await self._read_and_served(scope, receive, send, encoding=encoding)
        finally:
            if place is not None:
                place_return(place)

    async def _read_and_served(self, scope: Scope, receive: Receive, send: Send, *, encoding: str) -> None:
        """The body read and decoded, then handed to the app as one message."""
        headers = scope["headers"]
        try:
            raw = await self._read(receive)
            body = raw if encoding == "identity" else await self._decoded(raw, encoding=encoding)
        except (BodyTooLarge, BodyUndecodable, Overloaded, TimeoutError) as exc:
            await error_response_send(send, *self._refusal(exc), scope=scope)
            return
        except _Disconnected:
            return
        if encoding != "identity":
            scope = dict(scope)
            scope["headers"] = [(n, v) for n, v in headers if n not in (b"content-encoding", b"content-length")]
            scope["headers"].append((b"content-length", str(len(body)).encode()))
        await self.app(scope, _replay(body, receive), send)

    async def _decoded(self, raw: bytes, *, encoding: str) -> bytes:
        """Decoding is linear in the body, but a body of many tiny members is a few hundred milliseconds of
        Python at the limit: a large one is decoded in the body lane, off the event loop."""
        work = functools.partial(body_decode, data=raw, encoding=encoding, limit=self.max_bytes)
        return await body_lane_run(work=work, size=len(raw))

    def _refusal(self, exc: Exception) -> tuple[int, str, str]:
        """What a body that cannot be read gets: status, error type, message."""
        if isinstance(exc, BodyTooLarge):
            return 413, "request_too_large", exc.message or f"the body is over {self.max_bytes} bytes (decoded)"
        if isinstance(exc, BodyUndecodable):
            return 400, "invalid_request", str(exc)
        if isinstance(exc, Overloaded):  # the body lane is full
            return 529, "overloaded", str(exc)
        return 408, "request_timeout", f"the body did not arrive within {self.read_timeout:g} s"

    async def _read(self, receive: Receive) -> bytes:
        chunks: list[bytes] = []
        size = 0
        async with asyncio.timeout(self.read_timeout):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise _Disconnected
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self.max_bytes:
                    raise BodyTooLarge
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)

    def _streamed(self, receive: Receive, send: Send, *, scope: Scope, limit: int) -> Receive:
        """`receive` counted against `limit` and the deadlines; past either, the refusal is sent and the app is
        told the client left."""
        size, refused = 0, False
        deadline = asyncio.get_running_loop().time() + STREAMED_DEADLINE_FACTOR * self.read_timeout

        async def streamed() -> Message:
            nonlocal size, refused
            if refused:
                return {"type": "http.disconnect"}
            wait = min(self.read_timeout, deadline - asyncio.get_running_loop().time())
            try:
                async with asyncio.timeout(max(wait, 0.0)):
                    message = await receive()
            except TimeoutError as exc:
                refusal = self._refusal(exc)
            else:
                size += len(message.get("body", b""))
                if message["type"] != "http.request" or size <= limit:
                    return message
                refusal = 413, "request_too_large", f"the body is over {limit} bytes"
            refused = True
            await error_response_send(send, *refusal, scope=scope)
            return {"type": "http.disconnect"}

        return streamed


class _Disconnected(Exception):
    pass


def _replay(body: bytes, receive: Receive) -> Receive:
    """The decoded body as one message, then the real channel (Django watches it for disconnects)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay

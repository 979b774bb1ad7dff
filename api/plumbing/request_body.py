"""ASGI wrapper that enforces the body limit and decodes `Content-Encoding` before Django runs.

The limit is checked while the body streams in (413 as soon as it is exceeded, not after buffering
everything), and a compressed body is decoded with its output capped at the same limit, so a
compression bomb costs at most `max_bytes` of memory. The official SDK compresses bodies of 1 KiB
and more with zstd, so decoding is not optional.

Every method goes through the same checks: Django reads (and spools to disk) any body before it
routes, so a GET or DELETE body that skipped the reader could be a gigabyte read before the 405. The
whole body must also arrive within `read_timeout` seconds, or the answer is 408 and the connection
is closed: a client that stalls mid-body must not hold a connection and its buffer for ever (the
ASGI servers have no body timeout of their own; `serve` sets the header timeout).
"""

from __future__ import annotations

import asyncio
import io
import zlib

import zstandard

from api.errors import ApiError, error_body, shape_of_path
from api.plumbing.json_render import body_encode
from api.requestids import ASGIApp, Message, Receive, Scope, Send
from inference.errors import value_quoted

DECODERS = ("gzip", "x-gzip", "zstd", "identity")


class BodyTooLarge(Exception):
    pass


class BodyUndecodable(Exception):
    pass


def _decode_gzip(data: bytes, limit: int) -> bytes:
    decoder = zlib.decompressobj(zlib.MAX_WBITS | 16)
    try:
        out = decoder.decompress(data, limit + 1)
    except zlib.error as exc:
        raise BodyUndecodable(f"the gzip body is corrupt: {exc}") from None
    if len(out) > limit:
        raise BodyTooLarge
    if not decoder.eof:
        raise BodyUndecodable("the gzip body is truncated")
    return out


def _decode_zstd(data: bytes, limit: int) -> bytes:
    try:
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True) as reader:
            out = reader.read(limit + 1)
    except zstandard.ZstdError as exc:
        raise BodyUndecodable(f"the zstd body is corrupt: {exc}") from None
    if len(out) > limit:
        raise BodyTooLarge
    # The capped read cannot tell a truncated stream from a complete one; a second pass can, and
    # is safe now that the output is known to fit.
    decoder = zstandard.ZstdDecompressor().decompressobj()
    try:
        decoder.decompress(data)
    except zstandard.ZstdError as exc:
        raise BodyUndecodable(f"the zstd body is corrupt: {exc}") from None
    if not decoder.eof:
        raise BodyUndecodable("the zstd body is truncated")
    return out


def body_decode(*, data: bytes, encoding: str, limit: int) -> bytes:
    """Decode one Content-Encoding, output capped at `limit` bytes. No body is no body in any
    encoding (a GET that carries the header of its client's defaults)."""
    if not data:
        return data
    if encoding in ("gzip", "x-gzip"):
        return _decode_gzip(data, limit)
    if encoding == "zstd":
        return _decode_zstd(data, limit)
    return data


async def error_response_send(send: Send, status: int, error_type: str, message: str, *, scope: Scope) -> None:
    """The error in its route's shape, from `api.errors` like every other error of the API."""
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


class RequestBodyReader:
    """Reads the whole body before Django does: limit, decoding and deadline (see the module)."""

    def __init__(self, app: ASGIApp, *, max_bytes: int, read_timeout: float) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.read_timeout = read_timeout

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
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await error_response_send(
                send, 413, "request_too_large", f"the body is over {self.max_bytes} bytes", scope=scope
            )
            return
        try:
            raw = await self._read(receive)
            body = body_decode(data=raw, encoding=encoding, limit=self.max_bytes)
        except BodyTooLarge:
            await error_response_send(
                send, 413, "request_too_large", f"the body is over {self.max_bytes} bytes (decoded)", scope=scope
            )
            return
        except BodyUndecodable as exc:
            await error_response_send(send, 400, "invalid_request", str(exc), scope=scope)
            return
        except TimeoutError:
            await error_response_send(
                send, 408, "request_timeout", f"the body did not arrive within {self.read_timeout:g} s", scope=scope
            )
            return
        except _Disconnected:
            return
        if encoding != "identity":
            scope = dict(scope)
            scope["headers"] = [(n, v) for n, v in headers if n not in (b"content-encoding", b"content-length")]
            scope["headers"].append((b"content-length", str(len(body)).encode()))
        await self.app(scope, _replay(body, receive), send)

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

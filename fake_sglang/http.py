"""ASGI plumbing of the fake: JSON (orjson when installed), bodies, responses, the listening socket."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable
from typing import Any

try:  # orjson is optional: faster on the benchmark path, identical JSON for our values.
    import orjson

    def dumps(value: Any) -> bytes:
        return bytes(orjson.dumps(value))

    loads: Callable[[bytes], Any] = orjson.loads
except ImportError:  # pragma: no cover - depends on the environment

    def dumps(value: Any) -> bytes:
        return json.dumps(value, separators=(",", ":")).encode()

    loads = json.loads

ASGIReceive = Callable[[], Awaitable[dict[str, Any]]]
ASGISend = Callable[[dict[str, Any]], Awaitable[None]]


async def other_tasks_cancel() -> None:
    """Leave nothing pending on the loop before it closes (no 'Task was destroyed' noise)."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def loop_new() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop  # pragma: no cover - depends on the environment


def socket_bind(host: str, port: int) -> socket.socket:
    """A listening socket asyncio will give TCP_NODELAY connections (it checks proto == IPPROTO_TCP).

    With proto 0, Nagle plus delayed ACKs add ~40 ms to every answer sent as headers then body.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(4096)
    sock.setblocking(False)
    return sock


def auth_exempt(path: str) -> bool:
    """SGLang's api-key middleware lets health and metrics probes through without a key."""
    return path.startswith(("/health", "/metrics"))


def authorized(scope: dict[str, Any], api_key: str) -> bool:
    expected = b"Bearer " + api_key.encode()
    return any(name == b"authorization" and value == expected for name, value in scope["headers"])


async def body_read(receive: ASGIReceive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def respond(send: ASGISend, status: int, payload: Any) -> None:
    await respond_raw(send, status, dumps(payload), b"application/json")


async def respond_raw(send: ASGISend, status: int, body: bytes, content_type: bytes) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

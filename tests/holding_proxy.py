"""A real HTTP proxy in front of an SGLang-speaking server that holds chosen `/generate` calls until the test
releases them: how a test sees that an answer left before another branch was even answered.

The proxy forwards every request byte for byte (over its own httpx client) and the answer back; a call
whose JSON body `hold` selects waits first, on the proxy's event loop, until `release()`.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from testbed.live_server import LiveServer

Hold = Callable[[Any], bool]


class HoldingProxy:
    """ASGI app: forwards to `upstream`, holding the `/generate` calls `hold` selects."""

    def __init__(self, *, upstream: str, hold: Hold) -> None:
        self.upstream = upstream
        self.hold = hold
        self.held = 0
        self._release = threading.Event()
        self._lock = threading.Lock()

    def release(self) -> None:
        self._release.set()

    def wait_held(self, count: int, timeout: float = 10.0) -> None:
        """Block the calling thread until `count` calls are being held."""
        deadline = time.monotonic() + timeout
        while self.held < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.held} of {count} calls held after {timeout} s")
            time.sleep(0.002)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["path"] == "/generate" and self.hold(json.loads(body)):
            with self._lock:
                self.held += 1
            await asyncio.to_thread(self._release.wait, 30)
        headers = {k.decode(): v.decode() for k, v in scope["headers"] if k.lower() not in (b"host", b"content-length")}
        async with httpx.AsyncClient(base_url=self.upstream, timeout=30) as client:
            response = await client.request(scope["method"], scope["path"], content=body, headers=headers)
        await send(
            {
                "type": "http.response.start",
                "status": response.status_code,
                "headers": [(b"content-type", response.headers.get("content-type", "application/json").encode())],
            }
        )
        await send({"type": "http.response.body", "body": response.content})


@contextmanager
def holding_proxy(*, upstream: str, hold: Hold) -> Iterator[tuple[HoldingProxy, str]]:
    """The proxy served by uvicorn on loopback, and its URL; held calls are released on exit."""
    proxy = HoldingProxy(upstream=upstream, hold=hold)
    try:
        with LiveServer(proxy) as server:
            yield proxy, server.url
    finally:
        proxy.release()


def ends_with(suffix: tuple[int, ...]) -> Hold:
    """Selects a single-prompt `/generate` (a parallel branch) whose input ends with `suffix`, or a batch
    one of whose prompts does."""

    def hold(body: Any) -> bool:
        ids = body.get("input_ids") if isinstance(body, dict) else None
        prompts = ids if ids and isinstance(ids[0], list) else [ids or []]
        return any(tuple(p[-len(suffix) :]) == suffix for p in prompts)

    return hold

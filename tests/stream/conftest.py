"""A real WebSocket client (`websockets`) against the app served by uvicorn on loopback."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection

from testbed.live_server import LiveServer

TERMINAL = ("done", "error")


def ws_url(server: LiveServer, path: str = "/v1/systemone/stream") -> str:
    return server.url.replace("http://", "ws://") + path


@pytest.fixture
def stream_url(asgi_server: LiveServer) -> str:
    return ws_url(asgi_server)


async def send(ws: ClientConnection, message: Any) -> None:
    await ws.send(json.dumps(message))


async def receive(ws: ClientConnection) -> dict[str, Any]:
    message = json.loads(await ws.recv())
    assert isinstance(message, dict)
    return message


async def until_ended(ws: ClientConnection, ids: Iterable[Any]) -> list[dict[str, Any]]:
    """Every message until each of `ids` has had its one `done` or `error`; fails on a second one."""
    waiting = list(ids)
    seen: list[dict[str, Any]] = []
    while waiting:
        message = await receive(ws)
        seen.append(message)
        if message["type"] in TERMINAL and message["id"] in waiting:
            waiting.remove(message["id"])
        else:
            assert message["type"] == "answer" and message["id"] in waiting, message
    return seen


def of(messages: list[dict[str, Any]], eid: Any, kind: str | None = None) -> list[dict[str, Any]]:
    return [m for m in messages if m["id"] == eid and (kind is None or m["type"] == kind)]

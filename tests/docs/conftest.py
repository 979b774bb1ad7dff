"""Fixtures for the reference pages and drop-in client tests.

`wire_server` runs the real application under uvicorn behind `WireRecorder`, an ASGI middleware
that records each request as it arrived on the socket (headers, raw body, response status) before
the body reader decodes it: the only honest way to show the SDK really compressed a body.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from api.openapi.document import schema_document
from inference.runner import Evaluator
from testbed.live_server import LiveServer

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass
class WireRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes = b""
    status: int | None = None


@dataclass
class WireRecorder:
    """Records every HTTP request in front of `app`; `on_status` sees each response status as it starts."""

    app: ASGIApp
    requests: list[WireRequest] = field(default_factory=list)
    on_status: Callable[[WireRequest], None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        record = WireRequest(
            method=scope["method"],
            path=scope["path"],
            headers={k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]},
        )
        self.requests.append(record)

        async def recording_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                record.body += message.get("body", b"")
            return message

        async def recording_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                record.status = message["status"]
                if self.on_status is not None:
                    self.on_status(record)
            await send(message)

        await self.app(scope, recording_receive, recording_send)

    def to(self, path: str) -> list[WireRequest]:
        return [r for r in self.requests if r.path == path]


AppServer = LiveServer  # any ASGI app under uvicorn on loopback (here: the app behind a wire recorder)


@pytest.fixture
def wire_server(evaluator: Evaluator) -> Iterator[tuple[AppServer, WireRecorder]]:
    from openjev_site.asgi import application

    recorder = WireRecorder(application)
    with AppServer(recorder) as server:
        yield server, recorder


async def openapi(api: httpx.AsyncClient, path: str = "/openapi.json") -> dict[str, Any]:
    response = await api.get(path)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    document: dict[str, Any] = json.loads(response.content)
    return document


def component_validator(name: str, document: dict[str, Any] | None = None) -> Draft202012Validator:
    """A JSON Schema validator for one component of the document, its `$ref`s resolved inside it."""
    components = (document or schema_document())["components"]
    return Draft202012Validator({"$ref": f"#/components/schemas/{name}", "components": components})

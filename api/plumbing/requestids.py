"""One request id per API request, assigned before anything else runs and put on every response.

The outermost ASGI wrapper assigns the id, so the body reader's own refusals (400/408/413/415), Django's
404, DRF's 405, OPTIONS and every view's answer carry the request id's header without per-view code.
Views, storage and the error mapping read the same id (`request_id_current`), so the header, the
stored evaluation and the id quoted in a 5xx message are one value a client can hand to an operator.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from api.plumbing.formats import REQUEST_ID_HEADER, route_of_path
from serving.asgi_types import ASGIApp, Message, Receive, Scope, Send

HEADER = REQUEST_ID_HEADER.encode()

_current: ContextVar[str | None] = ContextVar("openjev_request_id", default=None)
_address: ContextVar[str | None] = ContextVar("openjev_client_address", default=None)


def request_id_assign(*, path: str) -> str:
    """A fresh id with the prefix of the path's wire format (`<prefix><hex>`; `req_` on a path of none)."""
    route = route_of_path(path)
    prefix = "req_" if route is None else route.primary.request_id_prefix
    return f"{prefix}{uuid.uuid4().hex}"


def request_id_headers(*, path: str) -> tuple[bytes, ...]:
    """The headers that carry the id on the path's responses: the wire format's own names for it too."""
    route = route_of_path(path)
    return (HEADER,) if route is None else tuple(name.encode() for name in route.primary.request_id_headers)


def client_address_current() -> str | None:
    """The client address of the API request being served (what limits count without API keys)."""
    return _address.get()


@contextmanager
def client_address_bound(*, address: str | None) -> Iterator[None]:
    """`address` as the current client's inside the block (a WebSocket stream's messages)."""
    token = _address.set(address)
    try:
        yield
    finally:
        _address.reset(token)


def request_id_current() -> str | None:
    """The id of the API request being served in this task, None outside one (admin, commands)."""
    return _current.get()


@contextmanager
def request_id_bound(*, request_id: str) -> Iterator[None]:
    """`request_id` as the current id inside the block: for an evaluation that arrives without an HTTP
    request of its own (one message of the WebSocket stream), so its logs and 5xx messages quote it."""
    token = _current.set(request_id)
    try:
        yield
    finally:
        _current.reset(token)


class RequestIds:
    """Assigns the id for the requests `applies` selects and adds the header to their responses
    (unless the app already set it). Django runs each view in a task created inside this call, and a
    task copies the context it was created in, so the id is visible everywhere below."""

    def __init__(self, app: ASGIApp, *, applies: Callable[[Scope], bool]) -> None:
        self.app = app
        self.applies = applies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.applies(scope):
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        request_id = request_id_assign(path=path)
        value = request_id.encode()
        names = request_id_headers(path=path)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                present = {name.lower() for name, _ in headers}
                missing = [(name, value) for name in names if name not in present]
                if missing:
                    message = {**message, "headers": [*headers, *missing]}
            await send(message)

        token = _current.set(request_id)
        client = scope.get("client")
        address_token = _address.set(str(client[0]) if client else None)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            _current.reset(token)
            _address.reset(address_token)

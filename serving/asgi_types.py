"""The ASGI interface's types, in one place for every ASGI wrapper of the site: the API's (request ids, body
reading, metering), the site's (hosts, sockets) and the serving's (forwarded client addresses). Here, in the
lowest room that all of them may import, so none of them keeps a copy."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def scope_headers(scope: Scope) -> dict[str, str]:
    """A request's headers by lowercase name (the last of a repeated one), for a decision taken before Django reads
    the request (a large upload's room, a large body's place in the body lane)."""
    return {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope.get("headers", ())}

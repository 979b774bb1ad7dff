"""A lean Django ASGI handler for the JSON API, beside the full one for the admin and the docs.

Django adapts every classic middleware to async by hopping to a worker thread twice per request
(process_request/process_response through sync_to_async), and a fresh thread-sensitive executor is
created per request: on the API that was most of the server's CPU per evaluation. The API needs
none of those middlewares (no sessions, cookies, CSRF or messages: it authenticates by Bearer key),
so its handler runs the URL resolver and the async view directly on the event loop.
"""

from __future__ import annotations

from typing import Any

from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.exception import convert_exception_to_response


class ApiASGIHandler(ASGIHandler):
    def load_middleware(self, is_async: bool = False) -> None:
        """What Django's load_middleware builds for an empty MIDDLEWARE list, in async mode."""
        self._view_middleware: list[Any] = []
        self._template_response_middleware: list[Any] = []
        self._exception_middleware: list[Any] = []
        self._middleware_chain = convert_exception_to_response(self._get_response_async)  # type: ignore[attr-defined]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        # Nothing on the API path runs thread-sensitive sync code, so the per-request
        # ThreadSensitiveContext (and the executor thread it would start) is not needed.
        if scope["type"] != "http":
            raise ValueError(f"the API serves HTTP only, not {scope['type']}")
        await self.handle(scope, receive, send)


API_PREFIXES = ("/v1/", "/health")


def path_is_api(scope: Any, *, script_name: str | None = None) -> bool:
    """Whether the request is for the API, under the ASGI root path or a forced script name."""
    return path_unprefixed(scope, script_name=script_name).startswith(API_PREFIXES)


def path_unprefixed(scope: Any, *, script_name: str | None = None) -> str:
    """The path below the ASGI root path or the forced script name, whichever it starts with."""
    path: str = scope.get("path", "")
    for root in (scope.get("root_path", ""), script_name or ""):
        if root and path.startswith(root):
            return path[len(root.rstrip("/")):]
    return path

"""A lean Django ASGI handler for the JSON API, beside the full one for the admin and the docs.

Django adapts every classic middleware to async by hopping to a worker thread twice per request
(process_request/process_response through sync_to_async), and a fresh thread-sensitive executor is
created per request: on the API that was most of the server's CPU per evaluation. The API needs
none of those middlewares (no sessions, cookies, CSRF or messages: it authenticates by Bearer key),
so its handler runs the URL resolver and the async view directly on the event loop.

Django also sends `request_started` and closes the response (which sends `request_finished`) through
`sync_to_async`, two more thread hops per request (about 5 % of the server's CPU on a 64-question
evaluation). Their receivers are Django's own (`reset_queries`, `close_old_connections`, `close_caches`,
`reset_urlconf`), and each touches only what this thread has opened: the API opens no database
connection or cache on the event loop (the database is used in worker threads that close their own
connections, `audit/keys.py`, `calibration/applied.py`), so here they run in place, in
microseconds. A receiver that blocked would stall the loop: `test_api_handler.py` pins the list.
"""

from __future__ import annotations

import asyncio
from contextlib import closing
from typing import Any

from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.exception import convert_exception_to_response
from django.urls import set_script_prefix


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

    async def handle(self, scope: Any, receive: Any, send: Any) -> None:
        """Django's `ASGIHandler.handle` with the request signals sent in place (see the module): read the
        body, respond while listening for a disconnect (which cancels the view), close the response."""
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        with closing(body_file):
            set_script_prefix(get_script_prefix(scope))
            signals.request_started.send(sender=self.__class__, scope=scope)
            request, error_response = self.create_request(scope, body_file)
            if request is None:
                if error_response is not None:
                    await self.send_response(error_response, send)
                    error_response.close()
                return
            response = None
            try:
                try:
                    async with asyncio.TaskGroup() as group:
                        group.create_task(self.listen_for_disconnect(receive))
                        response = await self.run_get_response(request)
                        await self.send_response(response, send)
                        raise _Processed
                except* (_Processed, RequestAborted):
                    pass
            except BaseExceptionGroup as failures:  # one failure is raised as itself, as Django does
                if len(failures.exceptions) == 1:
                    raise failures.exceptions[0] from None
                raise
            if response is None:
                signals.request_finished.send(sender=self.__class__)
            else:
                response.close()


class _Processed(Exception):
    """Ends the task group (and so the disconnect listener) once the response is sent."""


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

"""Every place the project reaches into Django's, DRF's or adrf's internals, in one module, with the
versions it was read against (`WRITTEN_FOR`).

Each piece below copies or touches something a framework does not promise to keep: a method's body, a
private attribute. They pay for themselves on the API's hot path (thread hops and middleware adapters
were most of the server's CPU per evaluation), but an upgrade can change what they rely on without an
error. So `tests/ops/test_compat.py` fails when an installed version differs from `WRITTEN_FOR`: re-read
each piece against the new release's source (the method each one names), then update the versions.
"""

from __future__ import annotations

import asyncio
import inspect
import io
from collections.abc import Iterator
from contextlib import closing
from typing import Any, Final

from adrf.views import APIView
from django.conf import settings
from django.contrib import admin
from django.contrib.auth.models import AnonymousUser
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.exception import convert_exception_to_response
from django.db.models import Model
from django.http import HttpRequest, HttpResponseBase
from django.urls import set_script_prefix, set_urlconf
from django.utils.log import log_response
from rest_framework.exceptions import MethodNotAllowed
from rest_framework.request import Request

WRITTEN_FOR: Final = {"django": "6.1", "djangorestframework": "3.18", "adrf": "0.1.14"}
"""The releases these pieces were read against: a major.minor for Django and DRF (their patch releases
change no internals), the exact release for adrf (below 1.0, any release may)."""


class LeanASGIHandler(ASGIHandler):
    """Django's ASGI handler for routes that need no middleware and no thread-sensitive code.

    Reads: `BaseHandler.load_middleware` (what it builds for an empty MIDDLEWARE list, in async mode),
    `ASGIHandler.__call__` (the per-request `ThreadSensitiveContext`, not needed),
    `ASGIHandler.handle` (copied, with `request_started` sent and the response closed in place rather
    than through `sync_to_async`: two thread hops per request), `BaseHandler.get_response_async` (copied, with
    an error response logged in place rather than through `sync_to_async`: a thread hop per 4xx and 5xx, which a
    flood of refused requests pays for on the event loop) and `ASGIHandler.read_body` (a body the request body
    reader hands over whole is not copied into a spooled file first)."""

    def load_middleware(self, is_async: bool = False) -> None:
        self._view_middleware: list[Any] = []
        self._template_response_middleware: list[Any] = []
        self._exception_middleware: list[Any] = []
        self._middleware_chain = convert_exception_to_response(self._get_response_async)  # type: ignore[attr-defined]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"this handler serves HTTP only, not {scope['type']}")
        await self.handle(scope, receive, send)

    async def handle(self, scope: Any, receive: Any, send: Any) -> None:
        """Read the body, respond while listening for a disconnect (which cancels the view), close the
        response."""
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

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        set_urlconf(settings.ROOT_URLCONF)
        response: Any = await self._middleware_chain(request)  # type: ignore[misc]  # async mode: a coroutine
        response._resource_closers.append(request.close)
        if response.status_code >= 400:  # a line to stderr at most: django.request logs at ERROR only
            log_response("%s: %s", response.reason_phrase, request.path, response=response, request=request)
        return response

    async def read_body(self, receive: Any) -> Any:
        """The body as one file: the request body reader (`api.plumbing.request_body`) hands every body but a
        streamed upload over whole, in one message, which is wrapped as it is (Django would copy it into a spooled
        file, two megabytes of copying on the event loop); a body in several messages is read as Django does."""
        message = await receive()
        if message["type"] == "http.disconnect":
            raise RequestAborted()
        if not message.get("more_body", False):
            return io.BytesIO(message.get("body", b""))
        first: list[Any] = [message]

        async def replayed() -> Any:
            return first.pop() if first else await receive()

        return await super().read_body(replayed)


class _Processed(Exception):
    """Ends the task group (and so the disconnect listener) once the response is sent."""


class LeanAPIView(APIView):
    """adrf's view with its dispatch minus the thread hops.

    Reads: adrf's `APIView.async_dispatch` (copied, with the authenticators awaited on the event loop
    before DRF's `initial`, which then finds the request authenticated and does no I/O) and DRF's
    `Request.user` / `Request.auth` setters. Authenticators here are async (`authenticate` awaited)."""

    async def async_dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        self.args, self.kwargs = args, kwargs
        drf_request = self.initialize_request(request, *args, **kwargs)
        self.request = drf_request
        self.headers = self.default_response_headers
        try:
            await self._authenticate(drf_request)
            self.initial(drf_request, *args, **kwargs)
            method = (drf_request.method or "").lower()
            handler = getattr(self, method, None) if method in self.http_method_names else None
            if handler is None:
                raise MethodNotAllowed(drf_request.method or "")
            response = handler(drf_request, *args, **kwargs)
            if inspect.isawaitable(response):  # DRF's own `options` handler is synchronous
                response = await response
        except Exception as exc:
            response = self.handle_exception(exc)
        self.response = self.finalize_response(drf_request, response, *args, **kwargs)
        return self.response

    async def _authenticate(self, request: Request) -> None:
        """Set `request.auth` to what the first authenticator found (None: anonymous); there are no users."""
        request.auth = None
        for authenticator in self.get_authenticators():
            found = await authenticator.authenticate(request)
            if found is not None:
                request.auth = found[1]
                break
        request.user = AnonymousUser()  # set, so DRF's `initial` calls no authenticator itself


def response_logged_mark(response: HttpResponseBase) -> None:
    """Tell Django's `log_response` (django.utils.log) that `response` was logged already, so a 5xx the
    project logs once at its own level (each 529 under overload) is not logged again at ERROR."""
    response._has_been_logged = True  # type: ignore[attr-defined]


def admin_registered(*, site: admin.AdminSite) -> Iterator[tuple[type[Model], admin.ModelAdmin[Any]]]:
    """Every model registered on `site` with its model admin: `AdminSite._registry`, which has no public
    equivalent (a copy, so the caller may re-register while iterating)."""
    yield from list(site._registry.items())

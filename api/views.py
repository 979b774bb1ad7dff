"""The views every route shares: the base (auth, cross-site refusal, admission, body reading, errors in the route's
shape) and the one every wire format's view extends (its format chosen by its path and body, answered by the format's
`serve`). No wire format is named here: each is read from its `WireFormat` (`api.plumbing.formats`). The routes of
no format have modules of their own: `api.model_views`, `api.status_views`, and feedback's in `api.feedback`."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from django.http import HttpResponse
from rest_framework.request import Request

from api.plumbing.api_error import ApiError
from api.plumbing.authentication import BearerKeyAuthentication
from api.plumbing.bodies import Body, body_checked, body_decode, body_parts_max
from api.plumbing.body_lane import body_lane_run
from api.plumbing.body_lane_places import lane_place_release
from api.plumbing.cross_site import cross_site_refused
from api.plumbing.error_responses import PLAIN, exception_response, shape_of_path
from api.plumbing.formats import REQUEST_ID_HEADER, ErrorShape, Route, WireFormat, route_of_path
from api.plumbing.metering import meter_caller, meter_current, phase_ended, phase_timed
from api.plumbing.multipart import is_multipart
from api.plumbing.ratelimits import Admission, request_admitted
from api.plumbing.requestids import client_address_current, request_id_assign, request_id_current
from audit.callers import Caller
from serving.compat import LeanAPIView

BodyChecked = Callable[[Body], Body]
"""What is done to a body in the turn that decoded it: its format's parse (`body_checked`)."""


async def _body_read(request: Request, *, multipart: bool, shape: ErrorShape, checked: BodyChecked | None) -> Body:
    """The body as JSON (and parts), then `checked`, both in one turn of the body lane when the body is large
    (`api.plumbing.body_lane`): the `parse` phase is the wait and the decoding, `validate` the format's parse."""
    started = time.time_ns()
    content_type = request._request.META.get("CONTENT_TYPE", "")
    raw = request._request.body
    if is_multipart(content_type) and not multipart:
        raise ApiError(415, "unsupported_media_type", "this endpoint takes a JSON body, not multipart/form-data")
    max_parts = body_parts_max()

    def read() -> Body:
        try:
            body = body_decode(raw=raw, content_type=content_type, shape=shape, max_parts=max_parts)
        finally:
            phase_ended("parse", start_ns=started)
        return body if checked is None else checked(body)

    return await body_lane_run(work=read, size=len(raw))


class ApiView(LeanAPIView):
    """Our views speak JSON only and map every failure through `api.plumbing.error_responses`, in `shape`. With auth
    on, every route needs the key (OPTIONS and errors such as 405 included), except the health checks."""

    authentication_classes: ClassVar[list[Any]] = [BearerKeyAuthentication]
    permission_classes: ClassVar[list[Any]] = []
    shape: ErrorShape = PLAIN

    def handle_exception(self, exc: Exception) -> HttpResponse:
        """In the view's shape, or, for a view of no format, the shape of the route family its path is in (a
        format's `family`: `GET /v1/models/{id}` is OpenAI's SDK's, so its 404 is in OpenAI's shape)."""
        request = getattr(self, "request", None)
        shape = self.shape if self.shape is not PLAIN or request is None else shape_of_path(request.path)
        return exception_response(exc, shape=shape)

    async def _served(
        self, request: Request, *, path: str, serve: Serve, multipart: bool = False, checked: BodyChecked | None = None
    ) -> HttpResponse:
        """Refuse what a web page sent, admit the request under its caller's limits (before its body is read:
        an invalid body counts too), read the body (JSON, or multipart with a JSON `request` part where the route
        takes one; `checked` in the same turn) and answer it with `serve`; the request id goes on errors too, so a
        client can quote it to operators."""
        request_id = request_id_current() or request_id_assign(path=path)
        caller = request.auth if isinstance(request.auth, Caller) else None
        try:
            cross_site_refused(request, content_type=request._request.META.get("CONTENT_TYPE", ""), multipart=multipart)
            meter_caller(label=caller.label if caller is not None else "")
            async with contextlib.AsyncExitStack() as admitted:
                with phase_timed("admission"):
                    admission = await admitted.enter_async_context(
                        request_admitted(caller=caller, address=client_address_current())
                    )
                body = await _body_read(request, multipart=multipart, shape=self.shape, checked=checked)
                lane_place_release()  # parsed: the caller's next large body may be read while this one runs
                response = await serve(body, request_id, caller, admission)
        except Exception as exc:
            response = self.handle_exception(exc)
            response[REQUEST_ID_HEADER] = request_id
        return response


Serve = Callable[[Body, str, Caller | None, Admission], Awaitable[HttpResponse]]


class WireFormatView(ApiView):
    """The view of a wire format's route, `path`: every error in the shape of the format the body is written in
    (the path's primary format's until the body is read), the body answered by that format's `serve`."""

    path: ClassVar[str]

    async def post(self, request: Request) -> HttpResponse:
        route = self._route()
        self.shape = route.format_announced(has_header=request.headers.__contains__).shape
        return await self._served(
            request,
            path=self.path,
            serve=self._format_served(route),
            multipart=any(f.multipart for f in route.formats),
            checked=lambda body: body_checked(body, check=route.format_of(data=body.data).check()),
        )

    def _route(self) -> Route:
        route = route_of_path(self.path)
        if route is None:
            raise LookupError(f"no wire format is installed on {self.path} (settings.API_WIRE_FORMATS)")
        return route

    def _format_served(self, route: Route) -> Serve:
        async def serve(body: Body, request_id: str, caller: Caller | None, admission: Admission) -> HttpResponse:
            wire_format: WireFormat = route.format_of(data=body.data)
            self.shape = wire_format.shape
            meter = meter_current()
            if meter is not None:
                meter.api = wire_format.name
            return await wire_format.serve(body, request_id, caller, admission)

        return serve

    def handle_exception(self, exc: Exception) -> HttpResponse:
        """An error before `post` ran (auth, a wrong method) is in the shape of the format the request's headers
        announce, the path's primary's unless another's header is there (`WireFormat.announced_by`)."""
        if not hasattr(self, "shape") or self.shape is PLAIN:
            route = route_of_path(self.path)
            request = getattr(self, "request", None)
            if route is None:
                self.shape = PLAIN
            elif request is None:
                self.shape = route.primary.shape
            else:
                self.shape = route.format_announced(has_header=request.headers.__contains__).shape
        return exception_response(exc, shape=self.shape)

"""The views every route shares: the base (auth, cross-site refusal, admission, body reading, errors in the route's
shape), the one every wire format's view extends (its format chosen by its path and body, answered by the format's
`serve`), and the routes of no format (models, limits, health, feedback). No wire format is named here: each is
read from its `WireFormat` (`api.plumbing.formats`)."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any, ClassVar

from django.conf import settings
from django.http import HttpResponse
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from api.feedback import feedback_record
from api.openapi import operations as doc
from api.openapi.feedback import feedback_schema
from api.plumbing.api_error import ApiError
from api.plumbing.authentication import BearerKeyAuthentication, caller_authenticate
from api.plumbing.bodies import Body, body_decode, body_parts_max
from api.plumbing.body_lane import body_lane_run
from api.plumbing.error_responses import PLAIN, exception_response, shape_of_path
from api.plumbing.evaluate import images_accepted
from api.plumbing.formats import (
    REQUEST_ID_HEADER,
    ErrorShape,
    Route,
    WireFormat,
    bare_key_of,
    route_of_path,
    wire_formats,
)
from api.plumbing.json_render import json_response
from api.plumbing.metering import meter_caller, meter_current, phase_timed
from api.plumbing.multipart import is_multipart
from api.plumbing.ratelimits import Admission, request_admitted
from api.plumbing.requestids import client_address_current, request_id_assign, request_id_current
from audit.callers import Caller
from audit.database import caches_age
from inference.errors import value_quoted
from serving import metrics
from serving.compat import LeanAPIView
from serving.evaluator import STARTUP_FAILED, evaluator_ready, evaluator_status
from serving.hosts import origin_same
from serving.workers import workers_state_current


async def _body_read(request: Request, *, multipart: bool, shape: ErrorShape) -> Body:
    """The body as JSON (and parts), read in the body lane when it is large (`api.plumbing.body_lane`)."""
    content_type = request._request.META.get("CONTENT_TYPE", "")
    raw = request._request.body
    if is_multipart(content_type) and not multipart:
        raise ApiError(415, "unsupported_media_type", "this endpoint takes a JSON body, not multipart/form-data")
    read = functools.partial(body_decode, raw=raw, content_type=content_type, shape=shape, max_parts=body_parts_max())
    return await body_lane_run(work=read, size=len(raw))


def cross_site_refused(request: Request, *, content_type: str, multipart: bool) -> None:
    """No page on another website may make this service evaluate, label or store: a browser sends a form or
    `text/plain` body cross-site without asking first, so a body must say it is JSON (which a browser sends
    cross-site only after a preflight this server never grants), and a request a browser marks as coming from
    another origin is refused whatever its type. Clients that are not browsers send no `Origin`. The Origin is
    compared with the host `ALLOWED_HOSTS` validated (a rebound name never gets this far), scheme and port
    included."""
    origin_refused(request)
    media = content_type.partition(";")[0].strip().lower()
    if media == "application/json" or media.endswith("+json") or (multipart and is_multipart(content_type)):
        return
    raise ApiError(
        415,
        "unsupported_media_type",
        f"send the body as JSON with Content-Type: application/json (got {media or 'no Content-Type'})",
    )


def origin_refused(request: Request) -> None:
    """A request a browser marks as coming from a web page of another origin is refused (403), whatever it is."""
    origin = request.headers.get("Origin")
    if origin is not None and not origin_same(
        origin=origin, scheme=request._request.scheme or "", host=request._request.get_host()
    ):
        raise ApiError(403, "permission_denied", "requests from a web page of another origin are refused")


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

    async def _served(self, request: Request, *, path: str, serve: Serve, multipart: bool = False) -> HttpResponse:
        """Refuse what a web page sent, admit the request under its caller's limits (before its body is read:
        an invalid body counts too), read the body (JSON, or multipart with a JSON `request` part where the route
        takes one) and answer it with `serve`; the request id goes on errors too, so a client can quote it to
        operators."""
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
                with phase_timed("parse"):
                    body = await _body_read(request, multipart=multipart, shape=self.shape)
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
            request, path=self.path, serve=self._format_served(route), multipart=any(f.multipart for f in route.formats)
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


async def _feedback_answer(body: Body, request_id: str, caller: Caller | None, admission: Admission) -> HttpResponse:
    labelled = await feedback_record(data=body.data, caller=caller)
    return json_response(
        body={
            "request_id": labelled.request_id,
            "question_id": labelled.question_id,
            "label": labelled.label,
            "labelled_at": labelled.labelled_at.isoformat(),
        },
        headers={REQUEST_ID_HEADER: request_id},
    )


class FeedbackView(ApiView):
    @feedback_schema
    async def post(self, request: Request) -> HttpResponse:
        return await self._served(request, path=request.path, serve=_feedback_answer)


class ModelsView(ApiView):
    @doc.models_schema
    async def get(self, request: Request) -> HttpResponse:
        config = settings.OPENJEV
        names = [config.model_alias, config.model]
        described = {config.model_alias: f"Alias of {config.model}", config.model: "Served model"}
        # What a format serves besides the language model (saved classifiers) goes in `data` only: Jev
        # clients read `models` as the names `model` accepts.
        return json_response(
            body={
                "models": [
                    {"name": n, "description": described[n], "release_date": config.model_release_date} for n in names
                ],
                "object": "list",
                "data": [model_entry(name=n) for n in await model_names()],
            }
        )


async def model_names() -> list[str]:
    """What `GET /v1/models` lists: the alias, the public model id, then what the formats serve besides."""
    config = settings.OPENJEV
    served = [name for f in wire_formats() if f.models is not None for name in await f.models()]
    return [config.model_alias, config.model, *served]


def model_entry(*, name: str) -> dict[str, Any]:
    """One model as the SDKs' `Model` type reads it (`id`, `object`, `created`, `owned_by`)."""
    return {"id": name, "object": "model", "created": MODEL_CREATED, "owned_by": "openjev"}


class ModelView(ApiView):
    """`GET /v1/models/{id}`: one listed model (the SDKs' `models.retrieve`), 404 for any other name."""

    @doc.model_schema
    async def get(self, request: Request, model_id: str) -> HttpResponse:
        if model_id not in await model_names():
            raise ApiError(404, "not_found", f"no model named {value_quoted(model_id)}; GET /v1/models lists them")
        return json_response(body=model_entry(name=model_id))


MODEL_CREATED = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp())
"""`created` of every model entry (the SDKs' `Model` requires one): a fixed date, since neither the service nor a
checkpoint knows when a model was created; clients read it as a sort key only."""


class LimitsView(ApiView):
    @doc.limits_schema
    async def get(self, request: Request) -> HttpResponse:
        c = settings.OPENJEV
        evaluator = evaluator_ready()  # read, never started here
        return json_response(
            body={
                "max_questions": c.max_questions,
                "max_answers_per_question": c.max_answers,
                "max_body_bytes": c.max_body_bytes,
                "max_images": images_accepted(),
                "max_image_bytes": c.max_image_bytes,
                # The backend's context may be smaller than the setting: what is enforced, once it is known.
                "max_input_tokens": c.max_input_tokens if evaluator is None else evaluator.budget.max_input_tokens,
                "max_total_input_tokens": c.max_total_input_tokens,
                "max_concurrent_requests": c.max_concurrent_requests,
                "max_concurrent_branches": c.max_concurrent_branches,
                "request_timeout_seconds": c.request_timeout,
                # What one request of a format may ask where the format's own rules differ.
                **{f.name: f.limits() for f in wire_formats() if f.limits is not None},
            }
        )


class HealthView(ApiView):
    authentication_classes: ClassVar[list[Any]] = []

    @doc.health_schema
    async def get(self, request: Request) -> HttpResponse:
        evaluator, startup_seconds, error = evaluator_status()
        backend = settings.OPENJEV.backend
        healthy = evaluator is not None and await evaluator.backend.health()
        metrics.backend_up.set(1 if healthy else 0)
        if evaluator is not None and healthy:
            body: dict[str, Any] = {
                "status": "ok",
                "backend": evaluator.backend.kind,
                "startup_seconds": startup_seconds,
            }
            if await _key_shown(request):
                body |= {"model": evaluator.backend.model, "worker_pid": os.getpid()}
                if (workers := workers_state_current()) is not None:
                    body["workers"] = asdict(workers)
                body["caches"] = caches_age()
            return json_response(body=body)
        body = {
            "status": "unavailable",
            "backend": backend,
            "startup_seconds": startup_seconds,
            "message": STARTUP_FAILED
            if error
            else ("the backend does not answer its health check" if evaluator else "starting"),
        }
        return json_response(body=body, status=503, headers={"Retry-After": "5"})


async def _key_shown(request: Request) -> bool:
    """Whether `/health` may name the model and the worker: always with auth off, else to a valid key only
    (load balancers probe without one, and learn only ready or not)."""
    if not settings.OPENJEV.auth_required:
        return True
    try:
        return (
            await caller_authenticate(
                authorization=request.headers.get("Authorization"), api_key=bare_key_of(header=request.headers.get)
            )
            is not None
        )
    except (AuthenticationFailed, ApiError):
        return False


class LiveView(ApiView):
    authentication_classes: ClassVar[list[Any]] = []

    @doc.live_schema
    async def get(self, request: Request) -> HttpResponse:
        return json_response(body={"status": "ok"})

"""Thin async API views: authenticate, read the body, call one service function, render the response."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from django.conf import settings
from django.http import HttpResponse
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from api.checking.json_body import BodyNotJson, body_parse
from api.classify.registry import classifier_names_list
from api.classify.render import classified_render
from api.classify.service import classify_run
from api.decisions.render import decided_headers, decided_render
from api.decisions.service import decisions_evaluate, decisions_limits
from api.errors import ApiError, Shape, body_invalid, exception_response
from api.feedback import feedback_record
from api.openapi import operations as doc
from api.openapi.classify import classify_schema
from api.openapi.feedback import feedback_schema
from api.plumbing.authentication import BearerKeyAuthentication, caller_authenticate
from api.plumbing.body_lane import body_lane_run
from api.plumbing.json_render import json_response
from api.plumbing.metering import meter_caller, phase_timed
from api.plumbing.multipart import MultipartInvalid, is_multipart, multipart_parse
from api.plumbing.ratelimits import Admission, request_admitted
from api.requestids import (
    CLASSIFY_PATH,
    DECISIONS_PATH,
    client_address_current,
    request_id_assign,
    request_id_current,
)
from api.systemone.render import served_headers, served_render
from api.systemone.service import systemone_evaluate
from audit.callers import Caller
from calibration.applied import calibrated_header
from serving import metrics
from serving.compat import LeanAPIView
from serving.evaluator import STARTUP_FAILED, evaluator_ready, evaluator_status
from serving.hosts import origin_same
from serving.workers import workers_state_current


@dataclass(frozen=True)
class Body:
    """A request's body: its JSON, and a multipart body's other parts (images) by name."""

    data: Any
    size: int
    """Bytes the body had as sent (decoded): what decides where it is read (`api.plumbing.body_lane`)."""
    parts: dict[str, bytes] = field(default_factory=dict)


MAX_PARTS_BEYOND_IMAGES = 8
"""Multipart parts a body may have beyond one per allowed image (the `request` part, and slack)."""


async def _body_read(request: Request, *, multipart: bool, shape: Shape) -> Body:
    """The body as JSON (and parts), read in the body lane when it is large (`api.plumbing.body_lane`)."""
    content_type = request._request.META.get("CONTENT_TYPE", "")
    raw = request._request.body
    if is_multipart(content_type) and not multipart:
        raise ApiError(415, "unsupported_media_type", "this endpoint takes a JSON body, not multipart/form-data")
    read = functools.partial(_body_decode, raw=raw, content_type=content_type, shape=shape)
    return await body_lane_run(work=read, size=len(raw))


def _body_decode(*, raw: bytes, content_type: str, shape: Shape) -> Body:
    """The body as JSON (and parts). A JSON error is System One's 422 `json_invalid` (a multipart one
    `multipart_invalid`); `POST /v1/classify` answers 400, as SGLang and vLLM do, and `POST /v1/decisions`
    as OpenAI does."""
    parts: dict[str, bytes] = {}
    size = len(raw)
    if is_multipart(content_type):
        try:
            parsed = multipart_parse(
                body=raw, content_type=content_type, max_parts=settings.OPENJEV.max_images + MAX_PARTS_BEYOND_IMAGES
            )
        except MultipartInvalid as exc:
            raise body_invalid(message=str(exc), error_type="multipart_invalid") from None
        raw, parts = parsed.request, parsed.parts
    try:
        return Body(data=body_parse(raw), size=size, parts=parts)
    except BodyNotJson as exc:
        if shape == "classify":
            raise ApiError(400, "invalid_request", str(exc)) from None
        if shape == "openai":
            raise ApiError(400, "invalid_json", f"We could not parse the JSON body of your request: {exc}") from None
        raise body_invalid(message=str(exc), error_type="json_invalid", position=exc.position) from None


def _cross_site_refused(request: Request, *, content_type: str, multipart: bool) -> None:
    """No page on another website may make this service evaluate, label or store: a browser sends a form or
    `text/plain` body cross-site without asking first, so a body must say it is JSON (which a browser sends
    cross-site only after a preflight this server never grants), and a request a browser marks as coming from
    another origin is refused whatever its type. Clients that are not browsers send no `Origin`. The Origin is
    compared with the host `ALLOWED_HOSTS` validated (a rebound name never gets this far), scheme and port
    included."""
    origin = request.headers.get("Origin")
    if origin is not None and not origin_same(
        origin=origin, scheme=request._request.scheme or "", host=request._request.get_host()
    ):
        raise ApiError(403, "permission_denied", "requests from a web page of another origin are refused")
    media = content_type.partition(";")[0].strip().lower()
    if media == "application/json" or media.endswith("+json") or (multipart and is_multipart(content_type)):
        return
    raise ApiError(
        415,
        "unsupported_media_type",
        f"send the body as JSON with Content-Type: application/json (got {media or 'no Content-Type'})",
    )


class ApiView(LeanAPIView):
    """Our views speak JSON only and map every failure through `api.errors`, in `shape`. With auth
    on, every route needs the key (OPTIONS and errors such as 405 included), except the health checks."""

    authentication_classes: ClassVar[list[Any]] = [BearerKeyAuthentication]
    permission_classes: ClassVar[list[Any]] = []
    shape: ClassVar[Shape] = "detail"
    multipart: ClassVar[bool] = False
    """Whether the body may be multipart/form-data (the official SDK's image uploads)."""

    def handle_exception(self, exc: Exception) -> HttpResponse:
        return exception_response(exc, shape=self.shape)

    async def _served(self, request: Request, *, path: str, serve: Serve) -> HttpResponse:
        """Refuse what a web page sent, admit the request under its caller's limits (before its body is read:
        an invalid body counts too), read the body (JSON, or multipart with a JSON `request` part on
        `/v1/systemone`) and answer it with `serve`; the request id goes on errors too, so a client can quote
        it to operators."""
        request_id = request_id_current() or request_id_assign(path=path)
        caller = request.auth if isinstance(request.auth, Caller) else None
        try:
            _cross_site_refused(
                request, content_type=request._request.META.get("CONTENT_TYPE", ""), multipart=self.multipart
            )
            meter_caller(label=caller.label if caller is not None else "")
            async with contextlib.AsyncExitStack() as admitted:
                with phase_timed("admission"):
                    admission = await admitted.enter_async_context(
                        request_admitted(caller=caller, address=client_address_current())
                    )
                with phase_timed("parse"):
                    body = await _body_read(request, multipart=self.multipart, shape=self.shape)
                response = await serve(body, request_id, caller, admission)
        except Exception as exc:
            response = self.handle_exception(exc)
            response["x-typesafe-request-id"] = request_id
        return response


Serve = Callable[[Body, str, Caller | None, Admission], Awaitable[HttpResponse]]
"""What a route does with a read body: (body, request id, caller, the caller's admission) -> the response."""


async def _systemone_answer(body: Body, request_id: str, caller: Caller | None, admission: Admission) -> HttpResponse:
    served = await systemone_evaluate(
        data=body.data, size=body.size, parts=body.parts, request_id=request_id, caller=caller, admission=admission
    )
    with phase_timed("render"):
        return json_response(body=served_render(served=served), headers=served_headers(served=served))


async def _decisions_answer(body: Body, request_id: str, caller: Caller | None, admission: Admission) -> HttpResponse:
    decided = await decisions_evaluate(
        data=body.data, size=body.size, request_id=request_id, caller=caller, admission=admission
    )
    with phase_timed("render"):
        return json_response(body=decided_render(decided=decided), headers=decided_headers(decided=decided))


async def _classify_answer(body: Body, request_id: str, caller: Caller | None, admission: Admission) -> HttpResponse:
    classified = await classify_run(
        data=body.data, size=body.size, request_id=request_id, caller=caller, admission=admission
    )
    headers = {"x-typesafe-request-id": request_id, "x-openjev-model": classified.served_model}
    with phase_timed("render"):
        return json_response(
            body=classified_render(classified=classified),
            headers=headers | calibrated_header(answers=classified.outcome.answers),
        )


async def _feedback_answer(body: Body, request_id: str, caller: Caller | None, admission: Admission) -> HttpResponse:
    labelled = await feedback_record(data=body.data, caller=caller)
    return json_response(
        body={
            "request_id": labelled.request_id,
            "question_id": labelled.question_id,
            "label": labelled.label,
            "labelled_at": labelled.labelled_at.isoformat(),
        },
        headers={"x-typesafe-request-id": request_id},
    )


class FeedbackView(ApiView):
    @feedback_schema
    async def post(self, request: Request) -> HttpResponse:
        return await self._served(request, path="/v1/feedback", serve=_feedback_answer)


class SystemOneView(ApiView):
    multipart = True

    @doc.systemone_schema
    async def post(self, request: Request) -> HttpResponse:
        return await self._served(request, path="/v1/systemone", serve=_systemone_answer)


class DecisionsView(ApiView):
    """`POST /v1/decisions`, OpenAI's Decisions API: every error of this route, 405 included, is in OpenAI's
    `{"error": {"message", "type", "param", "code"}}` shape."""

    shape = "openai"

    @doc.decisions_schema
    async def post(self, request: Request) -> HttpResponse:
        return await self._served(request, path=DECISIONS_PATH, serve=_decisions_answer)


class ClassifyView(ApiView):
    """`POST /v1/classify`, SGLang's and vLLM's classification API over saved classifiers; every error
    of this route, 405 included, is in their `{"error", "type", "code"}` shape."""

    shape = "classify"

    @classify_schema
    async def post(self, request: Request) -> HttpResponse:
        return await self._served(request, path=CLASSIFY_PATH, serve=_classify_answer)


class ModelsView(ApiView):
    @doc.models_schema
    async def get(self, request: Request) -> HttpResponse:
        config = settings.OPENJEV
        names = [config.model_alias, config.model]
        described = {config.model_alias: f"Alias of {config.model}", config.model: "Served model"}
        # Classifiers go in OpenAI's `data` only: Jev clients read `models` as the names /v1/systemone accepts.
        classifiers = await classifier_names_list()
        return json_response(
            body={
                "models": [
                    {"name": n, "description": described[n], "release_date": config.model_release_date} for n in names
                ],
                "object": "list",
                "data": [{"id": n, "object": "model", "owned_by": "openjev"} for n in [*names, *classifiers]],
            }
        )


class LimitsView(ApiView):
    @doc.limits_schema
    async def get(self, request: Request) -> HttpResponse:
        c = settings.OPENJEV
        return json_response(
            body={
                "max_questions": c.max_questions,
                "max_answers_per_question": c.max_answers,
                "max_body_bytes": c.max_body_bytes,
                "max_images": _images_accepted(),
                "max_image_bytes": c.max_image_bytes,
                "max_input_tokens": c.max_input_tokens,
                "max_total_input_tokens": c.max_total_input_tokens,
                "max_concurrent_requests": c.max_concurrent_requests,
                "max_concurrent_branches": c.max_concurrent_branches,
                "request_timeout_seconds": c.request_timeout,
                "decisions": _decisions_limits(),
            }
        )


def _decisions_limits() -> dict[str, int]:
    """What one `POST /v1/decisions` may ask on this server (OpenAI's API takes up to 400 questions)."""
    limits = decisions_limits()
    return {
        "max_questions": limits.max_questions,
        "max_choices": limits.max_choices,
        "max_levels": limits.max_levels,
        "max_images": _images_accepted(),
    }


def _images_accepted() -> int:
    """`OPENJEV_MAX_IMAGES`, or 0 once the evaluator is known to be unable to see (`images_not_supported`)."""
    evaluator = evaluator_ready()
    return 0 if evaluator is not None and evaluator.vision is None else settings.OPENJEV.max_images


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
        return await caller_authenticate(authorization=request.headers.get("Authorization")) is not None
    except (AuthenticationFailed, ApiError):
        return False


class LiveView(ApiView):
    authentication_classes: ClassVar[list[Any]] = []

    @doc.live_schema
    async def get(self, request: Request) -> HttpResponse:
        return json_response(body={"status": "ok"})

"""Thin async API views: authenticate, validate, call one service function, shape the response."""

from __future__ import annotations

import inspect
from typing import Any, ClassVar

from adrf.views import APIView
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from rest_framework.exceptions import MethodNotAllowed
from rest_framework.request import Request

from evaluations import schema as doc
from evaluations.auth import request_authenticate
from evaluations.classify import classifier_names_list, classify_id_new, classify_run
from evaluations.engine import STARTUP_FAILED, engine_status
from evaluations.errors import ApiError, api_exception_handler, classify_error_response, json_response
from evaluations.parsing import body_parse
from evaluations.services import Served, request_id_new, systemone_evaluate
from evaluations.wire import answer_render, label_mass_header
from openjev_site.requestid import request_id_current


class ApiView(APIView):
    """Our views speak JSON only and map every failure through `evaluations.errors`. With auth on,
    every route needs the key (OPTIONS and errors such as 405 included), except the health checks."""

    authentication_classes: ClassVar[list[Any]] = []
    permission_classes: ClassVar[list[Any]] = []
    key_required: ClassVar[bool] = True

    def handle_exception(self, exc: Exception) -> HttpResponse:
        return api_exception_handler(exc, {})

    async def async_dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        """adrf's dispatch minus its thread hop: `initial` runs no I/O here (no authentication or
        permission classes, no throttles), so it runs on the event loop."""
        self.args, self.kwargs = args, kwargs
        drf_request = self.initialize_request(request, *args, **kwargs)
        self.request = drf_request
        self.headers = self.default_response_headers
        try:
            self.initial(drf_request, *args, **kwargs)
            if self.key_required:  # the key label, recorded with the evaluation
                drf_request.auth = await request_authenticate(authorization=drf_request.headers.get("Authorization"))
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


def _key_label(request: Request) -> str | None:
    """The label of the key `ApiView` authenticated the request with (None while auth is off)."""
    label = request.auth
    return label if isinstance(label, str) else None


def _served_headers(served: Served) -> dict[str, str]:
    outcome = served.outcome
    t = outcome.timings
    headers = {
        "x-typesafe-request-id": served.request_id,
        "x-openjev-model": served.model,
        "x-openjev-prefix-tokens": str(outcome.prefix_tokens),
        "x-openjev-label-mass": label_mass_header(answers=outcome.answers),
        "Server-Timing": f"prepare;dur={t.prepare_ms:.2f}, prefill;dur={t.prefill_ms:.2f}, "
                         f"branches;dur={t.branches_ms:.2f}",
    }
    if outcome.cached_tokens is not None:
        headers["x-openjev-cached-tokens"] = str(outcome.cached_tokens)
    return headers


class SystemOneView(ApiView):
    @staticmethod
    async def _evaluate(request: Request, request_id: str) -> Served:
        try:
            data = body_parse(request._request.body)
        except ValueError as exc:
            raise ApiError(400, "invalid_request", str(exc)) from None
        return await systemone_evaluate(data=data, request_id=request_id, api_key=_key_label(request))

    @doc.systemone_schema
    async def post(self, request: Request) -> HttpResponse:
        request_id = request_id_current() or request_id_new()
        try:
            served = await self._evaluate(request, request_id)
        except Exception as exc:  # the id goes on errors too, so a client can quote it to operators
            response = self.handle_exception(exc)
            response["x-typesafe-request-id"] = request_id
            return response
        body = {
            "model": served.request.model,
            "answers": {a.question_id: answer_render(answer=a) for a in served.outcome.answers},
            "usage": {"input_tokens": served.outcome.usage.input_tokens,
                      "output_tokens": served.outcome.usage.output_tokens},
        }
        return json_response(body, headers=_served_headers(served))


class ClassifyView(ApiView):
    """`POST /v1/classify`, SGLang's and vLLM's classification API over saved classifiers; every error
    of this route, 405 included, is in their `{"error", "type", "code"}` shape."""

    def handle_exception(self, exc: Exception) -> HttpResponse:
        return classify_error_response(exc)

    @doc.classify_schema
    async def post(self, request: Request) -> HttpResponse:
        request_id = request_id_current() or classify_id_new()
        try:
            try:
                data = body_parse(request._request.body)
            except ValueError as exc:
                raise ApiError(400, "invalid_request", str(exc)) from None
            classified = await classify_run(data=data, request_id=request_id, api_key=_key_label(request))
        except Exception as exc:  # the id goes on errors too, so a client can quote it to operators
            response = self.handle_exception(exc)
            response["x-typesafe-request-id"] = request_id
            return response
        return json_response(classified.body(), headers={"x-typesafe-request-id": request_id,
                                                         "x-openjev-model": classified.served_model})


class ModelsView(ApiView):
    @doc.models_schema
    async def get(self, request: Request) -> HttpResponse:
        config = settings.OPENJEV
        names = [config.model_alias, config.model]
        described = {config.model_alias: f"Alias of {config.model}", config.model: "Served model"}
        # Classifiers go in OpenAI's `data` only: Jev clients read `models` as the names /v1/systemone accepts.
        classifiers = await classifier_names_list()
        return json_response({
            "models": [{"name": n, "description": described[n], "release_date": config.model_release_date}
                       for n in names],
            "object": "list",
            "data": [{"id": n, "object": "model", "owned_by": "openjev"} for n in [*names, *classifiers]],
        })


class LimitsView(ApiView):
    @doc.limits_schema
    async def get(self, request: Request) -> HttpResponse:
        c = settings.OPENJEV
        return json_response({
            "max_questions": c.max_questions,
            "max_answers_per_question": c.max_answers,
            "max_body_bytes": c.max_body_bytes,
            "max_input_tokens": c.max_input_tokens,
            "max_total_input_tokens": c.max_total_input_tokens,
            "max_concurrent_requests": c.max_concurrent_requests,
            "max_concurrent_branches": c.max_concurrent_branches,
            "request_timeout_seconds": c.request_timeout,
        })


class HealthView(ApiView):
    key_required = False

    @doc.health_schema
    async def get(self, request: Request) -> HttpResponse:
        engine, startup_seconds, error = engine_status()
        backend = settings.OPENJEV.backend
        if engine is not None and await engine.backend.health():
            return json_response({"status": "ok", "backend": engine.backend.kind, "model": engine.backend.model,
                                  "startup_seconds": startup_seconds})
        body = {"status": "unavailable", "backend": backend, "startup_seconds": startup_seconds,
                "message": STARTUP_FAILED if error else
                ("the backend does not answer its health check" if engine else "starting")}
        return json_response(body, status=503, headers={"Retry-After": "5"})


class LiveView(ApiView):
    key_required = False

    @doc.live_schema
    async def get(self, request: Request) -> HttpResponse:
        return json_response({"status": "ok"})

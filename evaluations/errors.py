"""Every error the API returns, in the two wire shapes, and the mapping from engine failures.

Clients retry every 5xx three times, so a client mistake must never be reported as one: anything
the caller can fix is a 4xx, and 5xx is kept for the backend and for our own bugs.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from django.http import HttpRequest, HttpResponse
from rest_framework import exceptions as drf_exceptions

from inference.errors import (
    BackendFailed,
    BackendUnavailable,
    EvaluationTimeout,
    InferenceError,
    Overloaded,
    Problem,
    RequestInvalid,
)

log = logging.getLogger(__name__)

RETRY_AFTER = {529: "1", 503: "5"}


class ApiError(Exception):
    """An error response in the `{"detail": {"error_type", "message"}}` shape."""

    def __init__(self, status: int, error_type: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message
        self.headers = headers or {}


def json_response(body: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> HttpResponse:
    content = json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    response = HttpResponse(content.encode("utf-8"), status=status, content_type="application/json")
    for name, value in (headers or {}).items():
        response[name] = value
    return response


REASONS = {529: "Site Is Overloaded"}


def _answered(response: HttpResponse) -> HttpResponse:
    """Mark a deliberate error as logged: Django would log every 5xx (each 529 under overload) at
    ERROR; ours are logged once, at the right level, where they are decided."""
    response._has_been_logged = True  # type: ignore[attr-defined]
    if response.status_code in REASONS:
        response.reason_phrase = REASONS[response.status_code]
    return response


def error_response(error: ApiError) -> HttpResponse:
    headers = dict(error.headers)
    if error.status in RETRY_AFTER:
        headers.setdefault("Retry-After", RETRY_AFTER[error.status])
    if error.status >= 500:  # overload is expected behaviour, not a fault
        log.log(logging.INFO if error.status == 529 else logging.WARNING, "%s %s: %s", error.status,
                error.error_type, error.message)
    body = {"detail": {"error_type": error.error_type, "message": error.message}}
    return _answered(json_response(body, status=error.status, headers=headers))


def validation_response(problems: list[Problem]) -> HttpResponse:
    body = {"detail": [{"loc": list(p.loc), "msg": p.msg, "type": p.type} for p in problems]}
    return _answered(json_response(body, status=422))


def inference_error_to_api(exc: InferenceError) -> ApiError:
    if isinstance(exc, Overloaded):
        return ApiError(529, "overloaded", str(exc))
    if isinstance(exc, BackendUnavailable):
        return ApiError(503, "backend_unavailable", str(exc))
    if isinstance(exc, EvaluationTimeout):
        return ApiError(504, "timeout", str(exc))
    if isinstance(exc, BackendFailed):
        return ApiError(502, "backend_error", str(exc))
    return ApiError(500, "internal_error", "the evaluation failed unexpectedly")


def exception_response(exc: Exception) -> HttpResponse:
    """The one place that turns any exception from an API view into a response."""
    if isinstance(exc, RequestInvalid):
        return validation_response(exc.problems)
    if isinstance(exc, ApiError):
        return error_response(exc)
    if isinstance(exc, InferenceError):
        return error_response(inference_error_to_api(exc))
    log.exception("unhandled error in an API view", exc_info=exc)
    return error_response(ApiError(500, "internal_error", "internal server error"))


DRF_ERROR_TYPES = {
    405: "method_not_allowed", 404: "not_found", 415: "unsupported_media_type", 406: "not_acceptable",
    400: "invalid_request", 401: "authentication_error", 403: "permission_denied", 429: "rate_limited",
}


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> HttpResponse:
    """DRF's hook: its own exceptions (405, parse errors) get our shape too."""
    if isinstance(exc, drf_exceptions.APIException):
        status = exc.status_code
        return error_response(ApiError(status, DRF_ERROR_TYPES.get(status, "invalid_request"), str(exc.detail)))
    return exception_response(exc)


def not_found_view(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return error_response(ApiError(404, "not_found", f"no route for {request.method} {request.path}"))


def server_error_view(request: HttpRequest) -> HttpResponse:
    return error_response(ApiError(500, "internal_error", "internal server error"))


def bad_request_view(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return error_response(ApiError(400, "invalid_request", "bad request"))


def permission_denied_view(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return error_response(ApiError(403, "permission_denied", "permission denied"))


def classify_error_response(exc: Exception) -> HttpResponse:
    """`POST /v1/classify` answers errors in SGLang's and vLLM's shape, `{"error", "type", "code"}`,
    because its clients were written for those servers; statuses, error types and headers are ours."""
    if isinstance(exc, RequestInvalid):
        error = ApiError(400, "invalid_request", str(exc))
    elif isinstance(exc, ApiError):
        error = exc
    elif isinstance(exc, InferenceError):
        error = inference_error_to_api(exc)
    elif isinstance(exc, drf_exceptions.APIException):
        error = ApiError(exc.status_code, DRF_ERROR_TYPES.get(exc.status_code, "invalid_request"), str(exc.detail))
    else:
        log.exception("unhandled error in an API view", exc_info=exc)
        error = ApiError(500, "internal_error", "internal server error")
    headers = dict(error.headers)
    if error.status in RETRY_AFTER:
        headers.setdefault("Retry-After", RETRY_AFTER[error.status])
    if error.status >= 500:
        log.log(logging.INFO if error.status == 529 else logging.WARNING, "%s %s: %s", error.status,
                error.error_type, error.message)
    body = {"error": error.message, "type": error.error_type, "code": error.status}
    return _answered(json_response(body, status=error.status, headers=headers))

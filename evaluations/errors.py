"""Every error the API returns, in the two wire shapes, and the mapping from engine failures.

Clients retry every 5xx three times, so a client mistake must never be reported as one: anything
the caller can fix is a 4xx, and 5xx is kept for the backend and for our own bugs.

A 5xx tells the client a stable message for its class and the request id, nothing else: the backend's
URL (with its credentials), its status and its own error text are for operators, who find them under
that id in the log and in the stored evaluation (`ApiError.internal`), redacted.
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
from openjev_site.redaction import configured_secrets, text_redact
from openjev_site.requestid import request_id_current

log = logging.getLogger(__name__)

RETRY_AFTER = {529: "1", 503: "5"}
PUBLIC_MESSAGES = {
    500: "internal server error",
    502: "the backend failed to answer this request",
    503: "the backend is unavailable; retry shortly",
    504: "the evaluation took longer than the request timeout",
}
"""What a client reads for each failure class of ours, whatever the cause."""


class ApiError(Exception):
    """An error response in the `{"detail": {"error_type", "message"}}` shape.

    `internal` is what operators get instead (log, stored row) when `message` is kept generic."""

    def __init__(self, status: int, error_type: str, message: str, headers: dict[str, str] | None = None,
                 *, internal: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message
        self.headers = headers or {}
        self.internal = internal


def error_text(*, error: BaseException) -> str:
    """An exception as operators read it, credentials redacted."""
    text = str(error) if isinstance(error, InferenceError) else f"{type(error).__name__}: {error}"
    return text_redact(text=text, secrets=configured_secrets())


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


def _error_prepared(error: ApiError) -> tuple[str, dict[str, str]]:
    """(the client's message, the headers) for any error shape; a 5xx is logged here, once, with the
    detail the client does not get. A fault's message names the request id, which finds that log line
    and the stored row."""
    headers = dict(error.headers)
    if error.status in RETRY_AFTER:
        headers.setdefault("Retry-After", RETRY_AFTER[error.status])
    message = error.message
    if error.status >= 500:  # overload is expected behaviour, not a fault
        request_id = request_id_current()
        log.log(logging.INFO if error.status == 529 else logging.WARNING, "%s %s (%s): %s", error.status,
                error.error_type, request_id or "no request id", error.internal or error.message)
        if error.status != 529 and request_id:
            message = f"{message} (request id {request_id})"
    return message, headers


def error_response(error: ApiError) -> HttpResponse:
    message, headers = _error_prepared(error)
    body = {"detail": {"error_type": error.error_type, "message": message}}
    return _answered(json_response(body, status=error.status, headers=headers))


def validation_response(problems: list[Problem]) -> HttpResponse:
    return _answered(json_response({"detail": _validation_detail(problems)}, status=422))


def _validation_detail(problems: list[Problem]) -> list[dict[str, Any]]:
    return [{"loc": list(p.loc), "msg": p.msg, "type": p.type} for p in problems]


def exception_detail(exc: BaseException) -> tuple[int, Any]:
    """(status, `detail`) exactly as a System One view would answer `exc`, for a transport without an
    HTTP response of its own (the WebSocket stream's error messages); a 5xx is logged as there."""
    if isinstance(exc, RequestInvalid):
        return 422, _validation_detail(exc.problems)
    error = _api_error_of(exc)
    message, _ = _error_prepared(error)
    return error.status, {"error_type": error.error_type, "message": message}


FAULTS: tuple[tuple[type[InferenceError], int, str], ...] = (
    (BackendUnavailable, 503, "backend_unavailable"),
    (EvaluationTimeout, 504, "timeout"),
    (BackendFailed, 502, "backend_error"),
)


def inference_error_to_api(exc: InferenceError) -> ApiError:
    """Overload's message is ours and useful (the limit); every fault gets its class's public message."""
    if isinstance(exc, Overloaded):
        return ApiError(529, "overloaded", str(exc))
    status, error_type = next(((s, t) for cls, s, t in FAULTS if isinstance(exc, cls)), (500, "internal_error"))
    return ApiError(status, error_type, PUBLIC_MESSAGES[status], internal=error_text(error=exc))


def unexpected_error_to_api(exc: BaseException) -> ApiError:
    """A bug: logged with its traceback here, answered as a bare 500."""
    log.exception("unhandled error in an API view", exc_info=exc)
    return ApiError(500, "internal_error", PUBLIC_MESSAGES[500], internal=error_text(error=exc))


def exception_response(exc: Exception) -> HttpResponse:
    """The one place that turns any exception from an API view into a response."""
    if isinstance(exc, RequestInvalid):
        return validation_response(exc.problems)
    return error_response(_api_error_of(exc))


def _api_error_of(exc: BaseException) -> ApiError:
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, InferenceError):
        return inference_error_to_api(exc)
    return unexpected_error_to_api(exc)


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
    return error_response(ApiError(500, "internal_error", PUBLIC_MESSAGES[500]))


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
        error = unexpected_error_to_api(exc)
    message, headers = _error_prepared(error)
    body = {"error": message, "type": error.error_type, "code": error.status}
    return _answered(json_response(body, status=error.status, headers=headers))

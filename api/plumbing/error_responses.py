"""Every error the API returns: one mapping from any exception to `ApiError`, one renderer per shape.

Clients retry every 5xx (the official SDKs twice by default), so a client mistake must never be reported as one:
anything the caller can fix is a 4xx, and 5xx is kept for the backend and for our own bugs.

A 5xx tells the client a stable message for its class and the request id, nothing else: the backend's
URL (with its credentials), its status and its own error text are for operators, who find them under
that id in the log and in the stored evaluation (`ApiError.internal`), redacted.

Each route writes its errors in its wire format's shape (`WireFormat.shape`, an `ErrorShape`: the status, the
body and the headers its clients read); a route of no format, and any path no format serves, writes the plain
shape, `{"detail": ...}` (a 422 lists its problems, located under `body`). Whatever produces an error (a view,
DRF, the URL resolver, the ASGI body reader) renders it here, by the shape of its path.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest, HttpResponse
from rest_framework import exceptions as drf_exceptions

from api.plumbing.api_error import ApiError, problems_text
from api.plumbing.formats import ErrorShape, route_of_path, shape_of_route
from api.plumbing.json_render import json_response
from api.plumbing.requestids import request_id_current
from inference.errors import (
    BackendFailed,
    BackendUnavailable,
    EvaluationTimeout,
    InferenceError,
    Overloaded,
    RequestInvalid,
    text_cut,
    value_quoted,
)
from serving.compat import response_logged_mark
from serving.redaction import configured_secrets, text_redact

log = logging.getLogger(__name__)

PLAIN = ErrorShape()
"""`{"detail": ...}`: routes of no wire format, and paths no format serves."""
RETRY_AFTER = {529: "1", 503: "5"}
RETRIED = frozenset({429, 503, 529})
"""Statuses worth retrying: a 504 ran out the request timeout and would again, a 502 or a 500 would fail again
(a shape whose clients read a retry hint says so)."""
REASONS = {529: "Site Is Overloaded"}
PUBLIC_MESSAGES = {
    500: "internal server error",
    502: "the backend failed to answer this request",
    503: "the backend is unavailable; retry shortly",
    504: "the evaluation took longer than the request timeout",
}
"""What a client reads for each failure class of ours, whatever the cause."""
FAULTS: tuple[tuple[type[InferenceError], int, str], ...] = (
    (BackendUnavailable, 503, "backend_unavailable"),
    (EvaluationTimeout, 504, "timeout"),
    (BackendFailed, 502, "backend_error"),
)
DRF_ERROR_TYPES = {
    405: "method_not_allowed",
    404: "not_found",
    415: "unsupported_media_type",
    406: "not_acceptable",
    400: "invalid_request",
    401: "authentication_error",
    403: "permission_denied",
    429: "rate_limited",
}


def error_text(*, error: BaseException) -> str:
    """An exception as operators read it, credentials redacted."""
    text = str(error) if isinstance(error, InferenceError) else f"{type(error).__name__}: {error}"
    return text_redact(text=text, secrets=configured_secrets())


def api_error_of(exc: BaseException) -> ApiError:
    """The one mapping: what the client gets for `exc` (a client that hung up gets nothing: 499)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, RequestInvalid):
        return ApiError(422, "validation_error", problems_text(exc.problems), problems=exc.problems)
    if isinstance(exc, Overloaded):  # its message is ours and useful (the limit)
        return ApiError(529, "overloaded", str(exc))
    if isinstance(exc, InferenceError):
        status, error_type = next(((s, t) for cls, s, t in FAULTS if isinstance(exc, cls)), (500, "internal_error"))
        return ApiError(status, error_type, PUBLIC_MESSAGES[status], internal=error_text(error=exc))
    if isinstance(exc, drf_exceptions.APIException):
        status = exc.status_code
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
        return ApiError(status, DRF_ERROR_TYPES.get(status, "invalid_request"), str(exc.detail), headers)
    if isinstance(exc, SuspiciousOperation):  # DisallowedHost and the like: the client's request, never our fault
        return ApiError(400, "invalid_request", "the request was refused as suspicious (its Host, or its headers)")
    if isinstance(exc, asyncio.CancelledError):
        if exc.args:  # cancelled on purpose, with the reason (a cancel message on the WebSocket stream)
            return ApiError(499, "cancelled", str(exc.args[0]))
        return ApiError(499, "client_closed", "the client disconnected before the answer was ready")
    return ApiError(500, "internal_error", PUBLIC_MESSAGES[500], internal=error_text(error=exc))


def error_body(error: ApiError, *, shape: ErrorShape = PLAIN, message: str | None = None) -> dict[str, Any]:
    """The error in its route's shape; `message` replaces the error's own (a 5xx's, with the request id)."""
    return shape.body(error, message=error.message if message is None else message)


def shape_of_path(path: str, *, has_header: Callable[[str], bool] | None = None) -> ErrorShape:
    """The error shape of the route a path is for, the plain one for any other path: its primary format's, or that
    of a format sharing the path whose header the request carries (`has_header`, for a request whose headers are
    known; `WireFormat.announced_by`)."""
    route = route_of_path(path)
    if route is None:
        return shape_of_route(path) or PLAIN
    return route.primary.shape if has_header is None else route.format_announced(has_header=has_header).shape


def error_response(error: ApiError, *, shape: ErrorShape = PLAIN, logged: bool = True) -> HttpResponse:
    """The response for `error`, logged as `error_message` says. `logged=False` for Django's own error
    views: Django logs their exception (with its traceback) once the view has answered."""
    headers = dict(error.headers)
    if error.status in RETRY_AFTER:
        headers.setdefault("Retry-After", RETRY_AFTER[error.status])
    status = shape.status(error)
    for name, value in shape.headers(error, status=status).items():
        headers.setdefault(name, value)
    headers = shape.headers_sent(headers)
    body = error_body(error, shape=shape, message=error_message(error) if logged else error.message)
    response = json_response(body=body, status=status, headers=headers)
    if logged:
        # Marked as logged: Django would log every 5xx (each 529 under overload) at ERROR; ours are logged
        # once, at the right level, in `error_message`.
        response_logged_mark(response)
    if response.status_code in REASONS:
        response.reason_phrase = REASONS[response.status_code]
    return response


def error_message(error: ApiError) -> str:
    """What the client reads. A 5xx is logged here, once, with the detail the client does not get, and
    its message names the request id, which finds that log line and the stored row."""
    message = error.message
    if error.status >= 500:  # overload is expected behaviour, not a fault
        request_id = request_id_current()
        log.log(
            logging.INFO if error.status == 529 else logging.WARNING,
            "%s %s (%s): %s",
            error.status,
            error.error_type,
            request_id or "no request id",
            error.internal or error.message,
        )
        if error.status != 529 and request_id:
            message = f"{message} (request id {request_id})"
    return message


def exception_response(exc: Exception, *, shape: ErrorShape = PLAIN) -> HttpResponse:
    """The one place that turns any exception from an API view into a response."""
    return error_response(_api_error_logged(exc), shape=shape)


def exception_detail(exc: BaseException) -> tuple[int, Any]:
    """(status, `detail`) exactly as the plain shape answers `exc`, for a transport without an HTTP response of
    its own (the WebSocket stream's error messages); logged as a response would be."""
    error = _api_error_logged(exc)
    return error.status, error_body(error, message=error_message(error))["detail"]


def _api_error_logged(exc: BaseException) -> ApiError:
    """`api_error_of`, with a bug logged with its traceback (answered as a bare 500)."""
    if not isinstance(
        exc, ApiError | InferenceError | drf_exceptions.APIException | asyncio.CancelledError | SuspiciousOperation
    ):
        log.exception("unhandled error in an API view", exc_info=exc)
    return api_error_of(exc)


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> HttpResponse:
    """DRF's hook: its own exceptions (405, parse errors) get our shape too (its route's)."""
    request = context.get("request")
    if request is None:
        return exception_response(exc, shape=PLAIN)
    return exception_response(exc, shape=shape_of_path(request.path, has_header=request.headers.__contains__))


def not_found_view(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return error_response(
        ApiError(404, "not_found", f"no route for {text_cut(request.method or '')} {value_quoted(request.path)}"),
        shape=shape_of_path(request.path),
        logged=False,
    )


def server_error_view(request: HttpRequest) -> HttpResponse:
    return error_response(
        ApiError(500, "internal_error", PUBLIC_MESSAGES[500]), shape=shape_of_path(request.path), logged=False
    )


def bad_request_view(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return error_response(
        ApiError(400, "invalid_request", "bad request"), shape=shape_of_path(request.path), logged=False
    )


def permission_denied_view(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return error_response(
        ApiError(403, "permission_denied", "permission denied"), shape=shape_of_path(request.path), logged=False
    )

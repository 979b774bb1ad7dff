"""Error responses as documented: both shapes, and the examples both endpoints share."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, OpenApiResponse
from rest_framework import serializers

from api.openapi.fields import ErrorTypeField, LocField
from api.plumbing.api_error import ApiError
from api.plumbing.error_responses import PLAIN, PUBLIC_MESSAGES, error_body
from api.plumbing.formats import ErrorShape


class ValidationProblemSerializer(serializers.Serializer):
    loc = LocField(help_text="Where the problem is, starting with `body`.")
    msg = serializers.CharField(help_text="What is wrong, for people.")
    type = serializers.CharField(help_text="What is wrong, for programs (e.g. `missing`, `too_long`).")


class ValidationErrorSerializer(serializers.Serializer):
    """422: the problems found, before any model work."""

    detail = ValidationProblemSerializer(
        many=True,
        help_text="The first 50 problems found; where there were more, one last entry of type `more_problems` says "
        "how many.",
    )


class ApiErrorDetailSerializer(serializers.Serializer):
    error_type = ErrorTypeField(help_text="What kind of error, for programs; one value per row of the error table.")
    message = serializers.CharField(help_text="What happened, for people.")


class ApiErrorSerializer(serializers.Serializer):
    """Every non-422 error: JSON, never HTML or a redirect."""

    detail = ApiErrorDetailSerializer(help_text="The error.")


class ClassifyErrorSerializer(serializers.Serializer):
    """Every error of `POST /v1/classify`, in SGLang's and vLLM's shape."""

    error = serializers.CharField(help_text="What happened, for people.")
    type = serializers.CharField(
        help_text="What kind of error, for programs: `invalid_request` (400), "
        "`authentication_error` (401), `not_found` (404), `overloaded` (529), "
        "`backend_unavailable` or `service_unavailable` (503), `backend_error` "
        "(502), `timeout` (504), ... as in the error table."
    )
    code = serializers.IntegerField(help_text="The HTTP status, repeated.")


EXAMPLE_REQUEST_ID = "req_5f0c3a9e2b7d4c18a6e1f4b2d9c07a35"

# Errors both endpoints answer the same way (only the body's shape differs), documented once. A fault's
# message is the same for every cause, plus the request id under which operators find the cause.
SHARED_ERRORS: dict[int, tuple[str, str]] = {
    401: ("authentication_error", "missing API key: send Authorization: Bearer <key>"),
    403: ("permission_denied", "requests from a web page of another origin are refused"),
    408: ("request_timeout", "the body did not arrive within 60 s"),
    413: ("request_too_large", "the body is over 2097152 bytes (decoded)"),
    415: ("unsupported_media_type", "Content-Encoding 'br' is not supported; use gzip, zstd or none"),
    **{
        status: (error_type, f"{PUBLIC_MESSAGES[status]} (request id {EXAMPLE_REQUEST_ID})")
        for status, error_type in (
            (500, "internal_error"),
            (502, "backend_error"),
            (503, "backend_unavailable"),
            (504, "timeout"),
        )
    },
    429: ("rate_limited", "rate limit reached for requests; retry in 12s"),
    529: ("overloaded", "16 evaluations are active (limit 16); retry shortly"),
}


def error_example(
    status: int, error_type: str, message: str, *, shape: ErrorShape = PLAIN, prefix: str = ""
) -> OpenApiExample:
    """A documented error, rendered by the API's own renderer for its shape (`prefix` names a shape's examples)."""
    name = f"{prefix}{error_type}"
    return OpenApiExample(
        name,
        value=error_body(ApiError(status, error_type, message), shape=shape),
        response_only=True,
        status_codes=[str(status)],
    )


def error_documented(description: str) -> OpenApiResponse:
    return OpenApiResponse(ApiErrorSerializer, description=description)


KEY_MISSING = error_documented("Auth is on and the Bearer key is missing or wrong (`authentication_error`).")
CROSS_SITE_DESCRIPTION = (
    "A browser request from a web page of another origin (its `Origin` is not this server's own: scheme, host "
    "and port), refused whatever its type (`permission_denied`). Clients that are not browsers send no `Origin`."
)
CROSS_SITE = error_documented(CROSS_SITE_DESCRIPTION)
BODY_CORRUPT = error_documented("The body is a corrupt gzip/zstd stream (`invalid_request`).")
BODY_LATE = error_documented("The body did not arrive in time (`request_timeout`); the connection is closed.")
BODY_TOO_LARGE = error_documented("The body, after decompression, is over `max_body_bytes` (`request_too_large`).")

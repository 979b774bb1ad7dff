"""What every Files and Batches operation (`api.batches.openapi`) declares alike: its errors, every one in OpenAI's
shape whatever refused the request, with their examples, its headers and parameters, and `operation_schema`, which
gives an operation the answers, examples and headers every one has, so each operation declares only its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.fields import empty

from api.batches.openapi_objects import BATCH_ID, FILE_ID
from api.batches.requests import LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX
from api.decisions.errors import OPENAI_SHAPE
from api.decisions.openapi_response import error_response
from api.openapi.errors import CROSS_SITE_DESCRIPTION, EXAMPLE_REQUEST_ID
from api.openapi.operations import AUTH_HEADER, OPTIONAL_AUTH, RATE_LIMIT_HEADERS, REQUEST_ID_HEADER
from api.plumbing.api_error import ApiError
from api.plumbing.error_responses import PUBLIC_MESSAGES, error_body


def error_example(status: int, code: str, message: str, *, param: str | None = None) -> OpenApiExample:
    return OpenApiExample(
        f"error_{status}_{code}",
        value=error_body(ApiError(status, code, message, param=param), shape=OPENAI_SHAPE),
        response_only=True,
        status_codes=[str(status)],
    )


UNAUTHENTICATED = error_response("Auth is on and the Bearer key is missing or wrong (`invalid_api_key`).")
CROSS_SITE = error_response(CROSS_SITE_DESCRIPTION)
RATE_LIMITED = error_response(
    "The key is over its requests per minute (`rate_limit_exceeded`; `retry-after`, `x-ratelimit-*`), or its "
    "counts cannot be read while `OPENJEV_RATE_LIMIT_FAILURE=closed`."
)
INTERNAL = error_response("A bug on our side (`internal_error`); `x-should-retry: false`.")
BODY_LATE = error_response("The body did not arrive in time (`request_timeout`); the connection is closed.")
BODY_TOO_LARGE = error_response("The body, after decompression, is over `max_body_bytes` (`request_too_large`).")
PAGE_INVALID = error_response(f"`limit` is not an integer from 1 to {LIST_LIMIT_MAX} (`invalid_request`).")
FILE_MISSING = error_response("No file of this key has this id (`not_found`): another key's file is not found either.")
BATCH_MISSING = error_response(
    "No batch of this key has this id (`not_found`): another key's batch is not found either."
)

KEY_MISSING = error_example(401, "authentication_error", "missing API key: send Authorization: Bearer <key>")
BUG = error_example(500, "internal_error", f"{PUBLIC_MESSAGES[500]} (request id {EXAMPLE_REQUEST_ID})")
FILE_NOT_FOUND = error_example(404, "not_found", f"No such File object: {FILE_ID}", param="id")
BATCH_NOT_FOUND = error_example(404, "not_found", f"No such Batch object: {BATCH_ID}", param="id")
LIMIT_INVALID = error_example(
    400, "invalid_request", f"limit must be an integer from 1 to {LIST_LIMIT_MAX}", param="limit"
)

SHOULD_RETRY = OpenApiParameter(
    "x-should-retry",
    str,
    OpenApiParameter.HEADER,
    required=True,
    response=[400, 401, 403, 404, 408, 413, 415, 429, 500],
    description="`true` or `false`: whether retrying can help, which the SDK obeys.",
)
RETRY_HINTS = [
    OpenApiParameter(
        "Retry-After",
        int,
        OpenApiParameter.HEADER,
        required=False,
        response=[429],
        description="Seconds to wait before retrying; absent where no wait helps (`x-should-retry: false`).",
    ),
    *(
        OpenApiParameter(p.name, p.type, p.location, required=False, response=p.response, description=p.description)
        for p in RATE_LIMIT_HEADERS
    ),
]
"""A 429 of a batch route: the key's per-minute limits, with their hints, or a batch its key could never run within
its window, refused for good (no hint, `x-should-retry: false`)."""
HEADERS = [REQUEST_ID_HEADER, SHOULD_RETRY, AUTH_HEADER]
PAGE_PARAMETERS = [
    OpenApiParameter(
        "limit",
        {"type": "integer", "minimum": 1, "maximum": LIST_LIMIT_MAX, "default": LIST_LIMIT_DEFAULT},
        OpenApiParameter.QUERY,
        description=f"Objects per page, 1 to {LIST_LIMIT_MAX} ({LIST_LIMIT_DEFAULT} by default).",
    ),
    OpenApiParameter("after", str, OpenApiParameter.QUERY, description="The previous page's `last_id`."),
]


def _path_id(name: str, what: str) -> OpenApiParameter:
    return OpenApiParameter(name, str, OpenApiParameter.PATH, description=f"The {what}'s id.")


FILE_ID_PARAMETER = _path_id("file_id", "file")
BATCH_ID_PARAMETER = _path_id("batch_id", "batch")


def operation_schema[F: Callable[..., Any]](
    operation_id: str,
    *,
    summary: str,
    description: str,
    tag: str,
    responses: dict[int | tuple[int, str], OpenApiResponse],
    examples: Sequence[OpenApiExample],
    parameters: Sequence[OpenApiParameter] = (),
    headers: Sequence[OpenApiParameter] = (),
    request: Any = empty,
    errors_as: str | None = None,
) -> Callable[[F], F]:
    """An operation of these routes from what is its own: its answers with the 401 and 500 every one may answer, in
    status order (of media type `errors_as` where its own answer is of another), its examples then those two's, its
    parameters, the headers every one answers with, then its own `headers`; auth optional."""

    def keyed(status: int) -> int | tuple[int, str]:
        return status if errors_as is None else (status, errors_as)

    every = {**responses, keyed(401): UNAUTHENTICATED, keyed(500): INTERNAL}
    return extend_schema(
        operation_id=operation_id,
        summary=summary,
        description=description,
        tags=[tag],
        request=request,
        responses=dict(sorted(every.items(), key=lambda item: item[0] if isinstance(item[0], int) else item[0][0])),
        examples=[*examples, KEY_MISSING, BUG],
        parameters=[*parameters, *HEADERS, *headers],
        auth=OPTIONAL_AUTH,
    )

"""`POST /v1/decisions` (OpenAI's Decisions API) as documented: the operation, its answers by status and its
headers; its body is in `openapi_request`, what it answers in `openapi_response`, its examples in
`openapi_examples`. And the errors of `GET /v1/models/{model_id}` in OpenAI's shape (`decisions_family_openapi`).

Documentation only, like `api/systemone/openapi.py`: the body is validated by
`api/decisions/parsing.py`; `tests/docs/test_schema.py` holds the two together, and every
example request evaluates.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema

from api.decisions.openapi_examples import DECISIONS_EXAMPLES
from api.decisions.openapi_request import DecisionsRequestSerializer
from api.decisions.openapi_response import DecisionsResponseSerializer, error_response
from api.openapi.errors import CROSS_SITE_DESCRIPTION
from api.openapi.operations import OPTIONAL_AUTH, RESPONSE_HEADERS

DECISIONS_RESPONSES: dict[int, OpenApiResponse] = {
    200: OpenApiResponse(DecisionsResponseSerializer, description="One answer per question, in question order."),
    400: error_response(
        "Invalid request, nothing was run: a body that is not JSON, a missing, unknown or invalid field "
        "(`param` names the first; the message lists the first 20, then how many more), a token budget, an "
        "image URL where the operator allows no host or not of an allowed host, an image that could not be "
        "fetched, or images where this deployment takes none (`OPENJEV_MAX_IMAGES` 0, as by default) or the "
        "served model cannot see."
    ),
    401: error_response("Auth is on and the Bearer key is missing or wrong (`invalid_api_key`)."),
    403: error_response(CROSS_SITE_DESCRIPTION),
    404: error_response("`model` names no model served here (`model_not_found`)."),
    408: error_response("The body did not arrive in time (`request_timeout`)."),
    413: error_response("The body, after decompression, is over `max_body_bytes` (`request_too_large`)."),
    415: error_response(
        "The `Content-Encoding` is not gzip, zstd or identity, or the body is not declared JSON "
        "(`unsupported_media_type`)."
    ),
    429: error_response(
        "The caller is over a per-key limit (`rate_limit_exceeded`): requests or input tokens per minute, or "
        "evaluations in flight; `retry-after`, `retry-after-ms`, `x-ratelimit-*`, `x-should-retry: true` (false "
        "where no retry can help: a paused key, a request larger than the whole per-minute token limit)."
    ),
    500: error_response("A bug on our side; `x-should-retry: false`."),
    502: error_response("The backend failed this request (`backend_error`); `x-should-retry: false`."),
    503: error_response(
        "The backend is unavailable or starting (`backend_unavailable`), or, with auth on, API keys cannot be "
        "checked right now; `retry-after`, `x-should-retry: true`."
    ),
    504: error_response(
        "The evaluation took longer than `request_timeout_seconds` (`timeout`); `x-should-retry: false`."
    ),
    529: error_response(
        "The server is full (`overloaded`, `max_concurrent_requests`); `retry-after`, `x-should-retry: true`."
    ),
}

DECISIONS_HEADERS = [
    OpenApiParameter(
        "x-request-id",
        str,
        OpenApiParameter.HEADER,
        required=True,
        response=True,
        description="This request's id (the same as `x-typesafe-request-id`), which the SDK exposes as `_request_id`.",
    ),
    OpenApiParameter(
        "x-should-retry",
        str,
        OpenApiParameter.HEADER,
        required=True,
        response=[400, 429, 500, 502, 503, 504, 529],
        description="`true` or `false`: whether retrying can help, which the SDK obeys.",
    ),
    OpenApiParameter(
        "x-openjev-label-mass",
        str,
        OpenApiParameter.HEADER,
        required=True,
        response=[200],
        description="The lowest label mass of the answers: near 1 when the model answered with labels.",
    ),
]

DECISIONS_DESCRIPTION = """\
OpenAI's Decisions API, for the official `openai` SDK unchanged (`client.decisions.create(...)`): the same
evaluation as `POST /v1/systemone` — the same prompt, scoring, calibration, admission and storage — so the same
question gets the same probabilities on either route. Errors are in OpenAI's shape; an invalid request is a 400.

An answer whose label mass is under `OPENJEV_REFUSAL_LABEL_MASS` (default 0: never) is a `refusal`; the other
questions still answer. Images are base64 `data:` URLs; a hosted image URL is fetched only from the hosts the
operator allows (`OPENJEV_IMAGE_URL_HOSTS`), otherwise refused.
"""


decisions_schema = extend_schema(
    operation_id="createDecision",
    summary="Decisions: typed answers about an input (OpenAI's Decisions API)",
    description=DECISIONS_DESCRIPTION,
    tags=["Decisions"],
    request=DecisionsRequestSerializer,
    responses=DECISIONS_RESPONSES,
    examples=DECISIONS_EXAMPLES,
    parameters=[*RESPONSE_HEADERS[:-1], *DECISIONS_HEADERS],
    auth=OPTIONAL_AUTH,
)


MODEL_PATH = "/v1/models/{model_id}"
"""The other route of OpenAI's SDK (`models.retrieve`), in this format's family (`format.FORMAT.family`)."""


def decisions_family_openapi(document: dict[str, Any]) -> None:
    """`GET /v1/models/{model_id}`'s errors in OpenAI's shape, as they are answered (the route is OpenAI's SDK's, and
    a 404 for an unknown name must read as the SDK's `NotFoundError`)."""
    operation = document["paths"].get(MODEL_PATH, {}).get("get")
    if operation is None:
        return
    for status, response in operation["responses"].items():
        if int(status) >= 400:
            response["content"] = {"application/json": {"schema": {"$ref": "#/components/schemas/OpenAIError"}}}

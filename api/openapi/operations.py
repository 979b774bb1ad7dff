"""What every operation's document shares (auth, the request id and retry headers, the headers of an answer) and
the operations of no wire format (models, limits, health); each format documents its own in its package."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema

from api.openapi.errors import (
    KEY_MISSING,
    error_documented,
)
from api.openapi.service import (
    HealthSerializer,
    LimitsSerializer,
    LiveSerializer,
    ModelsResponseSerializer,
    OpenAIModelSerializer,
)

SECURITY_SCHEME = "bearerAuth"
# Auth is optional for the API as a whole (off unless OPENJEV_API_KEY is set or keys are required), so
# the requirement lists "no auth" as an alternative: clients and "Test Request" may omit the key.
# drf-spectacular annotates `auth` as scheme names but writes the list verbatim as `security`: hence Any.
OPTIONAL_AUTH: Any = [{SECURITY_SCHEME: []}, {}]
NO_AUTH: Any = [{}]

REQUEST_ID_HEADER = OpenApiParameter(
    "x-typesafe-request-id",
    str,
    OpenApiParameter.HEADER,
    required=True,
    response=True,
    description="This request's id (`req_…`), on every response, errors included; an evaluation is stored under "
    "it. Quote it to the operator: a 5xx but a 529 names it in its message too.",
)
RETRY_AFTER_HEADER = OpenApiParameter(
    "Retry-After",
    int,
    OpenApiParameter.HEADER,
    required=True,
    response=[429, 503, 529],
    description="Seconds to wait before retrying.",
)
RATE_LIMIT_HEADERS = [
    OpenApiParameter(
        "retry-after-ms",
        int,
        OpenApiParameter.HEADER,
        required=True,
        response=[429],
        description="Milliseconds to wait before retrying (the SDKs prefer it to `Retry-After`).",
    ),
    *(
        OpenApiParameter(
            f"x-ratelimit-{what}-{counted}",
            str,
            OpenApiParameter.HEADER,
            required=False,
            response=[429],
            description=text.format(counted=counted),
        )
        for counted in ("requests", "tokens")
        for what, text in (
            ("limit", "The caller's limit of {counted} per minute (the window that was full)."),
            ("remaining", "What is left of it: 0 (the whole limit for a request larger than the limit itself)."),
            ("reset", "When the window has room again, e.g. `12s` or `1m3s`."),
        )
    ),
]
"""A 429: the caller (its API key, or its address without keys) is over one of its limits."""
RATE_LIMITED_DESCRIPTION = (
    "The caller is over a per-key limit (`rate_limited`): requests or input tokens per minute, "
    "or evaluations in flight (`OPENJEV_KEY_*`, or the key's own in the admin); retry after "
    "`Retry-After`. Also `rate_limits_unavailable` when the counts cannot be read and "
    "`OPENJEV_RATE_LIMIT_FAILURE=closed`, and too many wrong keys from one address."
)
AUTH_HEADER = OpenApiParameter(
    "WWW-Authenticate", str, OpenApiParameter.HEADER, required=True, response=[401], description="`Bearer`."
)

RESPONSE_HEADERS = [
    REQUEST_ID_HEADER,
    OpenApiParameter(
        "x-openjev-model",
        str,
        OpenApiParameter.HEADER,
        required=True,
        response=[200],
        description="The model the backend actually served.",
    ),
    OpenApiParameter(
        "x-openjev-prefix-tokens",
        int,
        OpenApiParameter.HEADER,
        required=True,
        response=[200],
        description="Length in tokens of the prefix shared by every question (state and chat template).",
    ),
    OpenApiParameter(
        "x-openjev-cached-tokens",
        int,
        OpenApiParameter.HEADER,
        required=False,
        response=[200],
        description="Prompt tokens the backend served from its prefix cache over all questions. "
        "Absent when the backend does not report it.",
    ),
    OpenApiParameter(
        "Server-Timing",
        str,
        OpenApiParameter.HEADER,
        required=True,
        response=[200],
        description="`prepare;dur=…, prefill;dur=…, branches;dur=…` in milliseconds: prompt building, "
        "the shared-prefix warm-up, and the questions.",
    ),
    OpenApiParameter(
        "x-openjev-calibrated",
        str,
        OpenApiParameter.HEADER,
        required=False,
        response=[200],
        description="Ids of the questions whose answers a fitted calibration adjusted, comma-separated; "
        "absent when none was (`OPENJEV_CALIBRATION`, `manage.py calibrate`).",
    ),
    RETRY_AFTER_HEADER,
    *RATE_LIMIT_HEADERS,
    AUTH_HEADER,
]


model_schema = extend_schema(
    operation_id="retrieveModel",
    summary="Describe one accepted model name",
    description="A name `GET /v1/models` lists (its `data` entry), as OpenAI's `models.retrieve` reads it.",
    tags=["Models"],
    responses={
        200: OpenApiResponse(OpenAIModelSerializer, description="The model."),
        401: KEY_MISSING,
        404: error_documented("No model of that name is listed (`not_found`)."),
    },
    parameters=[REQUEST_ID_HEADER, AUTH_HEADER],
    auth=OPTIONAL_AUTH,
)

models_schema = extend_schema(
    operation_id="listModels",
    summary="List the accepted model names",
    description="The values `model` accepts: the alias first, then the public model id (any other `jev-*` alias and "
    "the served id are accepted too). Weight repositories are not listed.",
    tags=["Models"],
    responses={
        200: OpenApiResponse(ModelsResponseSerializer, description="The models."),
        401: KEY_MISSING,
        500: error_documented("A bug on our side (`internal_error`)."),
    },
    parameters=[REQUEST_ID_HEADER, AUTH_HEADER],
    auth=OPTIONAL_AUTH,
)

limits_schema = extend_schema(
    operation_id="getLimits",
    summary="Admission limits of this deployment",
    description="The limits a request is checked against, from the server's `OPENJEV_*` settings and, for "
    "`max_input_tokens`, the backend's context; each key's own limits are in its `x-ratelimit-*` headers.",
    tags=["Service"],
    responses={
        200: OpenApiResponse(LimitsSerializer, description="The limits."),
        401: KEY_MISSING,
        500: error_documented("A bug on our side (`internal_error`)."),
    },
    parameters=[REQUEST_ID_HEADER, AUTH_HEADER],
    auth=OPTIONAL_AUTH,
)

health_schema = extend_schema(
    operation_id="health",
    summary="Readiness: is the backend answering?",
    description="200 when the backend answers its health check, else 503 (starting, failed to start, or unreachable). "
    "Never behind auth; meant for load balancers.",
    tags=["Service"],
    responses={
        200: OpenApiResponse(
            HealthSerializer,
            description="Ready.",
            examples=[
                OpenApiExample(
                    "ok",
                    value={
                        "status": "ok",
                        "backend": "sglang",
                        "model": "Qwen/Qwen3.6-35B-A3B",
                        "startup_seconds": 2.1,
                        "worker_pid": 4242,
                        "workers": {"up": 2, "configured": 2, "replaced": 0},
                    },
                )
            ],
        ),
        503: OpenApiResponse(HealthSerializer, description="Not ready; see `Retry-After`."),
        500: error_documented("A bug on our side (`internal_error`)."),
    },
    parameters=[
        REQUEST_ID_HEADER,
        OpenApiParameter(
            "Retry-After",
            int,
            OpenApiParameter.HEADER,
            required=True,
            response=[503],
            description="Seconds to wait before probing again.",
        ),
    ],
    auth=NO_AUTH,
)

live_schema = extend_schema(
    operation_id="liveness",
    summary="Liveness: is the process running?",
    description="200 whenever the process runs, whatever the backend's state. Never behind auth.",
    tags=["Service"],
    responses={200: OpenApiResponse(LiveSerializer, description="Alive.")},
    parameters=[REQUEST_ID_HEADER],
    auth=NO_AUTH,
)

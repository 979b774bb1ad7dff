"""Google's Decisions shape in the OpenAPI document.

`POST /v1/decisions` is one operation, which OpenAI's format documents with its view. This shape has no view, so it
writes itself into the generated document (`WireFormat.openapi`, called by `api.openapi.document`): its request,
response and error as named components (`GoogleDecisionRequest`, `GoogleDecisionResponse`, `GoogleError`, ...), each
the alternative (`oneOf`) of OpenAI's on the operation (the two never fit one body: Google's `questions` and
`answers` are maps, OpenAI's lists; Google's error has an integer `code` and a `status`, OpenAI's a `type` and a
`param`), its examples beside OpenAI's, a paragraph of the operation's description, the `x-goog-api-key` scheme
as an alternative to the Bearer key, and its block of `GET /v1/limits`.

The schemas are the shapes declared once in `api.google.contract` (the request, whose keys and members the parser
takes) and `api.google.contract_answers`, rendered here rather than through serializers: drf-spectacular builds
components only from the serializers of a view's own annotations, and the operation's annotations are OpenAI's
format's.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from api.checking.shapes import REF, components_rendered
from api.google.contract import REQUEST, REQUEST_COMPONENTS
from api.google.contract_answers import ANSWER_COMPONENTS, ERROR, LIMITS, RESPONSE
from api.google.errors import GOOGLE_SHAPE
from api.plumbing.api_error import ApiError
from api.plumbing.error_responses import error_body
from inference.errors import Problem
from serving.config_reading import config_from_env

PATH = "/v1/decisions"
V1BETA_PATH = "/v1beta/decisions"
"""Where Google's clients post by default, the shape's own path (`format.FORMAT.own_path`)."""
SCHEME = "googleApiKey"

GOOGLE_REQUEST: dict[str, Any] = {
    "model": "models/jev-latest",
    "input": "Hi, I was charged twice for my March invoice and the refund still hasn't arrived. Fix it today!",
    "questions": {
        "refund": {"type": "noul", "instructions": "Is the customer asking for money back?"},
        "team": {
            "type": "choice",
            "instructions": "Which team should handle this ticket?",
            "criteria": {
                "Billing": "Payments, invoices, refunds",
                "Technical": "Bugs, outages",
                "Sales": "Pricing, upgrades",
            },
        },
        "anger": {
            "type": "score",
            "instructions": "How frustrated is the customer?",
            "criteria": ["Calm", "Frustrated", "Very angry"],
        },
    },
}
"""The README's three questions in Google's shape: the same questions as System One's README request, so the same
probabilities."""

GOOGLE_RESPONSE: dict[str, Any] = {
    "answers": {
        "refund": {"type": "noul", "noul": 0.88, "confidence": 0.88},
        "team": {
            "type": "choice",
            "choice": "Billing",
            "confidence": 0.8,
            "probabilities": {"Billing": 0.8, "Technical": 0.13, "Sales": 0.07},
        },
        "anger": {
            "type": "score",
            "score": 1.26,
            "confidence": 0.5,
            "probabilities": {"0": 0.12, "1": 0.5, "2": 0.38},
            "legend": {"0": "Calm", "1": "Frustrated", "2": "Very angry"},
        },
    },
    "usage": {
        "total_input_tokens": 402,
        "total_output_tokens": 4,
        "total_tokens": 406,
        "total_cached_tokens": 288,
        "input_tokens_by_modality": [{"modality": "text", "tokens": 402}],
    },
    "model": "models/jev-latest",
}

GOOGLE_ERRORS = {
    400: ApiError(
        400,
        "too_short",
        "questions.team.criteria: A choice question needs between 2 and 255 options, got 1",
        problems=[
            Problem(
                ("questions", "team", "criteria"),
                "A choice question needs between 2 and 255 options, got 1",
                "too_short",
            )
        ],
    ),
    401: ApiError(401, "authentication_error", "invalid API key"),
    404: ApiError(
        404,
        "model_not_found",
        "'models/gemini-decision-1' is not found on this server; use models/jev-latest or models/Qwen/Qwen3.6-35B-A3B "
        "(the prefix is optional)",
    ),
    429: ApiError(
        429,
        "rate_limited",
        "rate limit reached for requests; retry in 12s",
        {"retry-after": "12", "retry-after-ms": "12000"},
    ),
}
"""One example of each error a Google client meets most."""

DESCRIPTION = """

**Google's Decisions shape**, for `google-genai` unchanged (`client.decisions.create(...)` with
`http_options={"base_url": ...}`), is answered on this same path: a body whose `questions` is a **map** of ids to
`noul` / `choice` / `score` questions (`GoogleDecisionRequest`) is Google's, and gets `GoogleDecisionResponse` and
errors in Google's shape (`GoogleError`: `code`, `message`, `status`, `details`; an invalid request is a 400
`INVALID_ARGUMENT`). The same evaluation again: the same question gets System One's probabilities (a `noul` kept
within [0.01, 0.99]; `confidence` is the winning outcome's probability, as Google defines it). `model` may carry
Google's `models/` prefix. The key may come as `x-goog-api-key` (the SDK's header) instead of a Bearer token; a
request carrying it gets its errors in Google's shape even before its body is read. `Retry-After` is at most 2 s
on Google's errors (the SDK waits what it says, four times over); the full wait is in the `RetryInfo` detail.
Image `uri`s are fetched only from the hosts the operator allows (`OPENJEV_IMAGE_URL_HOSTS`); otherwise send base64
`data`.
"""


def _alternative(media: dict[str, Any], component: str) -> None:
    media["schema"] = {"oneOf": [media["schema"], {"$ref": f"{REF}{component}"}]}


def google_openapi(document: dict[str, Any]) -> None:
    """Write the shape into `document` (see the module)."""
    config = config_from_env({}) if settings.OPENJEV.auth_required else settings.OPENJEV
    schemas = document["components"]["schemas"]
    values = {"max_questions": config.max_decisions_questions, "max_answers": config.max_answers}
    schemas.update(components_rendered(*REQUEST_COMPONENTS, *ANSWER_COMPONENTS, values=values))
    limits = schemas["Limits"]
    limits["properties"]["google"] = {
        "$ref": f"{REF}{LIMITS.name}",
        "description": "What one `POST /v1/decisions` in Google's shape may ask.",
    }
    limits["required"] = [*limits.get("required", []), "google"]
    document["components"]["securitySchemes"][SCHEME] = {
        "type": "apiKey",
        "in": "header",
        "name": "x-goog-api-key",
        "description": "The key as Google's SDK sends it, read when there is no `Authorization` header; any value "
        "is accepted while auth is off.",
    }
    operation = document["paths"][PATH]["post"]
    operation["description"] += DESCRIPTION
    operation["security"] = [*operation["security"][:-1], {SCHEME: []}, operation["security"][-1]]
    request = operation["requestBody"]["content"]["application/json"]
    _alternative(request, REQUEST.name)
    request.setdefault("examples", {})["GoogleReadme"] = {
        "value": GOOGLE_REQUEST,
        "summary": "The README's three questions in Google's shape",
    }
    for status, response in operation["responses"].items():
        media = response["content"]["application/json"]
        if status == "200":
            _alternative(media, RESPONSE.name)
            media.setdefault("examples", {})["GoogleAnswers"] = {"value": GOOGLE_RESPONSE, "summary": "google"}
            continue
        _alternative(media, ERROR.name)
        error = GOOGLE_ERRORS.get(int(status))
        if error is not None:
            media.setdefault("examples", {})[f"GoogleError{status}"] = {
                "value": error_body(error, shape=GOOGLE_SHAPE),
                "summary": f"google_error_{status}",
            }

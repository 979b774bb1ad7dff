"""Google's Decisions shape in the OpenAPI document.

`POST /v1/decisions` is one operation, which OpenAI's format documents with its view. This shape has no view, so it
writes itself into the generated document (`WireFormat.openapi`, called by `api.openapi.document`): its request,
response and error as named components (`GoogleDecisionRequest`, `GoogleDecisionResponse`, `GoogleError`, ...), each
the alternative (`oneOf`) of OpenAI's on the operation (the two never fit one body: Google's `questions` and
`answers` are maps, OpenAI's lists; Google's error has an integer `code` and a `status`, OpenAI's a `type` and a
`param`), its examples beside OpenAI's, a paragraph of the operation's description, the `x-goog-api-key` scheme
as an alternative to the Bearer key, and its block of `GET /v1/limits`.

The schemas are written as JSON Schema here rather than as serializers: drf-spectacular builds components only from
the serializers of a view's own annotations, and the operation's annotations are OpenAI's format's.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from api.google.errors import GOOGLE_SHAPE
from api.google.parsing import IMAGE_TYPES, MODEL_PREFIX
from api.plumbing.api_error import ApiError
from api.plumbing.error_responses import error_body
from inference.errors import Problem
from serving.config_reading import config_from_env

PATH = "/v1/decisions"
V1BETA_PATH = "/v1beta/decisions"
"""Where Google's clients post by default, the shape's own path (`format.FORMAT.own_path`)."""
SCHEME = "googleApiKey"
REF = "#/components/schemas/"

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


def _text(description: str, **schema: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **schema}


def _object(description: str, properties: dict[str, Any], required: list[str], **schema: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "properties": properties,
        "required": required,
        "additionalProperties": False,
        **schema,
    }


def _union(description: str, members: dict[str, str], *, on: str = "type") -> dict[str, Any]:
    return {
        "description": description,
        "oneOf": [{"$ref": f"{REF}{name}"} for name in members.values()],
        "discriminator": {"propertyName": on, "mapping": {kind: f"{REF}{name}" for kind, name in members.items()}},
    }


def _const(value: str, description: str) -> dict[str, Any]:
    return {"type": "string", "const": value, "description": description}


def _probability(description: str) -> dict[str, Any]:
    return {"type": "number", "minimum": 0, "maximum": 1, "description": description}


def components(*, max_questions: int, max_answers: int) -> dict[str, dict[str, Any]]:
    """The shape's schemas, with this deployment's limits."""
    instructions = {
        "description": "What is asked: a string, a text block or a list of text blocks (joined with newlines); "
        "required, and an empty one asks the type's own question (as System One's null or empty instructions). Text "
        "only: images go in the input.",
        "oneOf": [
            {"type": "string"},
            {"$ref": f"{REF}GoogleTextBlock"},
            {"type": "array", "items": {"$ref": f"{REF}GoogleTextBlock"}, "minItems": 1},
        ],
    }
    question_type = "The question's type: `noul` (yes/no), `choice` (one of its options) or `score` (a level)."
    confidence = _probability(
        "The winning outcome's probability, as Google defines `confidence`: max(noul, 1 − noul) for a noul, the top "
        "probability for a choice or a score. **Not** System One's `confidence` (how peaked the distribution is)."
    )
    return {
        "GoogleTextBlock": _object(
            "A text content block.",
            {
                "type": _const("text", "`text`."),
                "text": _text("The text."),
                "annotations": {
                    "type": "array",
                    "items": {"type": "object"},
                    "description": "Citations of generated text: accepted, not read.",
                },
            },
            ["type", "text"],
        ),
        "GoogleImageBlock": _object(
            "An image content block: exactly one of base64 `data` or a `uri` (https, of a host the operator allows; "
            "refused where none is allowed), where the deployment takes images (`max_images`).",
            {
                "type": _const("image", "`image`."),
                "data": _text("The image's bytes, base64 (standard alphabet).", contentEncoding="base64"),
                "mime_type": _text(
                    "The image's type; the bytes' own signature is what counts.", enum=list(IMAGE_TYPES)
                ),
                "resolution": _text(
                    "Accepted, not read: the backend sees the image as it is.",
                    enum=["low", "medium", "high", "ultra_high"],
                ),
                "uri": _text("An https URL of a host the operator allows (`OPENJEV_IMAGE_URL_HOSTS`); else a 400."),
            },
            ["type"],
            oneOf=[{"required": ["data"]}, {"required": ["uri"]}],
        ),
        "GoogleContentBlock": _union(
            "One block of the input: text or an image (`document`, `audio` and `video` are refused with a 400).",
            {"text": "GoogleTextBlock", "image": "GoogleImageBlock"},
        ),
        "GoogleNoulCriteria": _object(
            "What yes and no mean: System One's `criteria.true` / `criteria.false`. A side missing, null or empty "
            "reads as the default side.",
            {
                "true_description": {"type": ["string", "null"], "description": "What a yes means."},
                "false_description": {"type": ["string", "null"], "description": "What a no means."},
            },
            [],
        ),
        "GoogleNoulQuestion": _object(
            "A yes/no question: the answer is P(true).",
            {
                "type": _const("noul", question_type),
                "instructions": instructions,
                "criteria": {"$ref": f"{REF}GoogleNoulCriteria", "description": "Optional: what yes and no mean."},
            },
            ["type", "instructions"],
        ),
        "GoogleChoiceQuestion": _object(
            "Pick one of the options: every option's probability.",
            {
                "type": _const("choice", question_type),
                "instructions": instructions,
                "criteria": {
                    "type": "object",
                    "description": "Option id → description, in order; the model reads the description, or the id "
                    'where it is `""` (or null). Ids are non-empty, without control characters or surrounding '
                    "whitespace.",
                    "additionalProperties": {"type": ["string", "null"]},
                    "propertyNames": {"minLength": 1},
                    "minProperties": 2,
                    "maxProperties": max_answers,
                },
            },
            ["type", "instructions", "criteria"],
        ),
        "GoogleScoreQuestion": _object(
            "Rate on ordered levels: the expected level index and every level's probability.",
            {
                "type": _const("score", question_type),
                "instructions": instructions,
                "criteria": {
                    "type": "array",
                    "description": "Each level's rubric, lowest first; each a non-empty string.",
                    "items": {"type": "string", "minLength": 1},
                    "minItems": 2,
                    "maxItems": max_answers,
                },
            },
            ["type", "instructions", "criteria"],
        ),
        "GoogleQuestion": _union(
            "One question, discriminated by `type`.",
            {"noul": "GoogleNoulQuestion", "choice": "GoogleChoiceQuestion", "score": "GoogleScoreQuestion"},
        ),
        "GoogleDecisionRequest": _object(
            "Google's Decisions request (`google-genai`'s `client.decisions.create`): told from OpenAI's by its "
            "`questions`, a map.",
            {
                "model": _text(
                    f"`{MODEL_PREFIX}jev-latest` (or any `jev-*` alias, the public or the served model id), with or "
                    f"without the `{MODEL_PREFIX}` prefix; anything else is a 404 `NOT_FOUND`."
                ),
                "input": {
                    "description": "What every question is about, read as one user message: a string, a content "
                    "block, or a list of them (texts joined with newlines, images where they stand); not empty.",
                    "oneOf": [
                        {"type": "string", "minLength": 1},
                        {"$ref": f"{REF}GoogleContentBlock"},
                        {"type": "array", "items": {"$ref": f"{REF}GoogleContentBlock"}, "minItems": 1},
                    ],
                },
                "questions": {
                    "type": "object",
                    "description": "Question id → question, 1 to `max_questions` (`GET /v1/limits`, `google`); "
                    "the answers come back under the same ids.",
                    "additionalProperties": {"$ref": f"{REF}GoogleQuestion"},
                    "propertyNames": {"minLength": 1},
                    "minProperties": 1,
                    "maxProperties": max_questions,
                },
            },
            ["model", "input", "questions"],
        ),
        "GoogleNoulAnswer": _object(
            "A noul's answer.",
            {
                "type": _const("noul", "`noul`."),
                "noul": {
                    "type": "number",
                    "minimum": 0.01,
                    "maximum": 0.99,
                    "description": "P(true), System One's `noul` kept within [0.01, 0.99] (Google's range).",
                },
                "confidence": confidence,
            },
            ["type", "noul", "confidence"],
        ),
        "GoogleChoiceAnswer": _object(
            "A choice's answer.",
            {
                "type": _const("choice", "`choice`."),
                "choice": _text("The most likely option id (ties: the first)."),
                "confidence": confidence,
                "probabilities": {
                    "type": "object",
                    "description": "Every option id's probability, in the request's order; they sum to 1.",
                    "additionalProperties": {"type": "number", "minimum": 0, "maximum": 1},
                },
            },
            ["type", "choice", "confidence", "probabilities"],
        ),
        "GoogleScoreAnswer": _object(
            "A score's answer.",
            {
                "type": _const("score", "`score`."),
                "score": {"type": "number", "minimum": 0, "description": "The expected level index, Σ i·p_i."},
                "confidence": confidence,
                "probabilities": {
                    "type": "object",
                    "description": 'Every level\'s probability, keyed "0" to "n-1"; they sum to 1.',
                    "additionalProperties": {"type": "number", "minimum": 0, "maximum": 1},
                },
                "legend": {
                    "type": "object",
                    "description": "Each level's rubric, keyed as `probabilities`.",
                    "additionalProperties": {"type": "string"},
                },
            },
            ["type", "score", "confidence", "probabilities", "legend"],
        ),
        "GoogleAnswer": _union(
            "One answer, of its question's type.",
            {"noul": "GoogleNoulAnswer", "choice": "GoogleChoiceAnswer", "score": "GoogleScoreAnswer"},
        ),
        "GoogleModalityTokens": _object(
            "Prompt tokens of one modality.",
            {"modality": _text("`text`.", enum=["text"]), "tokens": {"type": "integer", "description": "Tokens."}},
            ["modality", "tokens"],
        ),
        "GoogleUsage": _object(
            "Tokens the backend read for this request, in Google's fields.",
            {
                "total_input_tokens": {
                    "type": "integer",
                    "description": "Prompt tokens the backend read (warm-up and every question).",
                },
                "total_output_tokens": {
                    "type": "integer",
                    "description": "N + 1: one position read per question, and the warm-up.",
                },
                "total_tokens": {"type": "integer", "description": "Input and output tokens."},
                "total_cached_tokens": {
                    "type": "integer",
                    "description": "Prompt tokens the backend served from its prefix cache (0 when it does not say).",
                },
                "input_tokens_by_modality": {
                    "type": "array",
                    "items": {"$ref": f"{REF}GoogleModalityTokens"},
                    "description": "All input tokens as `text`, when the input holds no image; left out when it "
                    "does (the backends do not count image tokens apart).",
                },
            },
            ["total_input_tokens", "total_output_tokens", "total_tokens", "total_cached_tokens"],
        ),
        "GoogleDecisionResponse": _object(
            "Google's Decisions response.",
            {
                "answers": {
                    "type": "object",
                    "description": "Question id → answer, in the request's order.",
                    "additionalProperties": {"$ref": f"{REF}GoogleAnswer"},
                },
                "usage": {"$ref": f"{REF}GoogleUsage", "description": "Tokens the backend read."},
                "model": _text("The model as requested (Google's response names none; its clients keep it)."),
            },
            ["answers", "usage", "model"],
        ),
        "GoogleErrorInfo": _object(
            "What kind of error, for programs.",
            {
                "@type": _const("type.googleapis.com/google.rpc.ErrorInfo", "The detail's type."),
                "reason": _text(
                    "The error type upper-cased (`TOO_SHORT`, `MODEL_NOT_FOUND`, `RATE_LIMITED`, ...); "
                    "`API_KEY_INVALID` for a missing or wrong key, as Gemini names it."
                ),
                "domain": _text("`openjev`.", enum=["openjev"]),
            },
            ["@type", "reason", "domain"],
        ),
        "GoogleFieldViolation": _object(
            "One problem of the request.",
            {
                "field": _text("The field at fault: `questions.team.criteria`, `input[1].data`."),
                "description": _text("What is wrong with it."),
                "reason": _text("The problem's type (`too_short`, `unknown_field`, ...)."),
            },
            ["field", "description", "reason"],
        ),
        "GoogleBadRequest": _object(
            "Every problem of an invalid request (the first 50).",
            {
                "@type": _const("type.googleapis.com/google.rpc.BadRequest", "The detail's type."),
                "fieldViolations": {
                    "type": "array",
                    "items": {"$ref": f"{REF}GoogleFieldViolation"},
                    "description": "The problems, each with its field.",
                },
            },
            ["@type", "fieldViolations"],
        ),
        "GoogleRetryInfo": _object(
            "How long to wait before retrying: the full wait, where `Retry-After` is cut to 2 s.",
            {
                "@type": _const("type.googleapis.com/google.rpc.RetryInfo", "The detail's type."),
                "retryDelay": _text("A duration: `12s`, `0.250s`."),
            },
            ["@type", "retryDelay"],
        ),
        "GoogleRequestInfo": _object(
            "The request's id, as in the response's `x-typesafe-request-id`: what to quote to operators.",
            {
                "@type": _const("type.googleapis.com/google.rpc.RequestInfo", "The detail's type."),
                "requestId": _text("The request id (`req_...`)."),
            },
            ["@type", "requestId"],
        ),
        "GoogleErrorDetail": _union(
            "One typed detail of an error.",
            {
                "type.googleapis.com/google.rpc.ErrorInfo": "GoogleErrorInfo",
                "type.googleapis.com/google.rpc.BadRequest": "GoogleBadRequest",
                "type.googleapis.com/google.rpc.RetryInfo": "GoogleRetryInfo",
                "type.googleapis.com/google.rpc.RequestInfo": "GoogleRequestInfo",
            },
            on="@type",
        ),
        "GoogleErrorStatus": _object(
            "The error, as `google.rpc.Status`.",
            {
                "code": {"type": "integer", "description": "The HTTP status."},
                "message": _text(
                    "What happened, for people; a 400 lists the first 20 problems found (`field: what`), then how "
                    "many more."
                ),
                "status": _text(
                    "The status's `google.rpc.Code`: `INVALID_ARGUMENT` (400), `UNAUTHENTICATED` (401), "
                    "`PERMISSION_DENIED` (403), `NOT_FOUND` (404), `RESOURCE_EXHAUSTED` (429), `INTERNAL` (500, "
                    "502), `UNAVAILABLE` (503, 529), `DEADLINE_EXCEEDED` (408, 504)."
                ),
                "details": {
                    "type": "array",
                    "items": {"$ref": f"{REF}GoogleErrorDetail"},
                    "description": "An `ErrorInfo`; a `BadRequest` for an invalid request; a `RetryInfo` where the "
                    "server asks for a wait; a `RequestInfo` with the request id.",
                },
            },
            ["code", "message", "status", "details"],
        ),
        "GoogleError": _object(
            "Every error of a Google client on this path, in Google's shape.",
            {"error": {"$ref": f"{REF}GoogleErrorStatus", "description": "The error."}},
            ["error"],
        ),
        "GoogleLimits": _object(
            "What one request in Google's shape may ask; over a limit is a 400 naming it.",
            {
                "max_questions": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Questions (`OPENJEV_MAX_DECISIONS_QUESTIONS`; Google's API takes 1000).",
                },
                "max_choices": {"type": "integer", "minimum": 2, "description": "Options of one choice question."},
                "max_levels": {"type": "integer", "minimum": 2, "description": "Levels of one score question."},
                "max_images": {"type": "integer", "minimum": 0, "description": "Images in the input; 0: refused."},
            },
            ["max_questions", "max_choices", "max_levels", "max_images"],
        ),
    }


def _alternative(media: dict[str, Any], component: str) -> None:
    media["schema"] = {"oneOf": [media["schema"], {"$ref": f"{REF}{component}"}]}


def google_openapi(document: dict[str, Any]) -> None:
    """Write the shape into `document` (see the module)."""
    config = config_from_env({}) if settings.OPENJEV.auth_required else settings.OPENJEV
    schemas = document["components"]["schemas"]
    schemas.update(components(max_questions=config.max_decisions_questions, max_answers=config.max_answers))
    limits = schemas["Limits"]
    limits["properties"]["google"] = {
        "$ref": f"{REF}GoogleLimits",
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
    _alternative(request, "GoogleDecisionRequest")
    request.setdefault("examples", {})["GoogleReadme"] = {
        "value": GOOGLE_REQUEST,
        "summary": "The README's three questions in Google's shape",
    }
    for status, response in operation["responses"].items():
        media = response["content"]["application/json"]
        if status == "200":
            _alternative(media, "GoogleDecisionResponse")
            media.setdefault("examples", {})["GoogleAnswers"] = {"value": GOOGLE_RESPONSE, "summary": "google"}
            continue
        _alternative(media, "GoogleError")
        error = GOOGLE_ERRORS.get(int(status))
        if error is not None:
            media.setdefault("examples", {})[f"GoogleError{status}"] = {
                "value": error_body(error, shape=GOOGLE_SHAPE),
                "summary": f"google_error_{status}",
            }

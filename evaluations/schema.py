"""The OpenAPI description of the API: shapes, descriptions, headers and named examples.

drf-spectacular builds documents from serializers, so the classes below exist only to be described:
no request is ever validated by them (that is `evaluations/parsing.py`, hand-written for FastAPI-style
error locations and byte-exact keys). They say what the parser accepts and what the views return;
`tests/docs/test_schema.py` holds the two together (every documented example request evaluates, and
schemathesis checks every response against these shapes).

The views carry the decorators at the bottom (`systemone_schema`, ...). Limits that depend on the
deployment (questions per request, options per question) are written into the document by
`schema_postprocess` from `settings.OPENJEV` when the document is generated, once per process.
"""

from __future__ import annotations

import copy
from typing import Any

from django.conf import settings
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers

from evaluations.errors import PUBLIC_MESSAGES

SECURITY_SCHEME = "bearerAuth"
# Auth is optional for the API as a whole (off unless OPENJEV_API_KEY is set or keys are required), so
# the requirement lists "no auth" as an alternative: clients and "Test Request" may omit the key.
# drf-spectacular annotates `auth` as scheme names but writes the list verbatim as `security`: hence Any.
OPTIONAL_AUTH: Any = [{SECURITY_SCHEME: []}, {}]
NO_AUTH: Any = [{}]

ERROR_TYPES = (
    "invalid_request", "authentication_error", "permission_denied", "not_found", "method_not_allowed",
    "not_acceptable", "unsupported_media_type", "request_too_large", "request_timeout", "rate_limited", "overloaded",
    "backend_unavailable", "backend_error", "timeout", "internal_error",
)

# ---------------------------------------------------------------------------------------------------
# Field shapes the serializers cannot say on their own
# ---------------------------------------------------------------------------------------------------

_TEXT_TYPES = ["string", "object", "array"]


@extend_schema_field({"type": _TEXT_TYPES, "items": {}})
class TextField(serializers.JSONField):
    """A string, or structured text (an object or array the model reads as compact JSON)."""


@extend_schema_field({"type": [*_TEXT_TYPES, "null"], "items": {}})
class NullableTextField(serializers.JSONField):
    """Text that may also be null (meaning: use the default, or show the option key)."""


@extend_schema_field({"type": "array", "items": {"type": ["string", "integer"]}, "minItems": 1})
class LocField(serializers.JSONField):
    """A FastAPI-style location: `["body", "questions", <id>, ...]`, with integers for array indexes."""


@extend_schema_field({"type": "string", "enum": list(ERROR_TYPES)})
class ErrorTypeField(serializers.CharField):
    """The machine-readable error kind; see the error table in the API description."""


@extend_schema_field({"type": "string", "examples": ["jev-latest"]})
class ModelField(serializers.CharField):
    """A model name; not an enum, since any `jev-*` alias is accepted."""


@extend_schema_field({"type": "string", "enum": ["ok", "unavailable"]})
class HealthStatusField(serializers.CharField):
    """`ok`, or `unavailable` with a `message`."""


def _const(value: str) -> type[serializers.CharField]:
    """A discriminator field: JSON Schema `const`, so each union member is unambiguous to generators."""

    @extend_schema_field({"type": "string", "const": value, "enum": [value]})
    class ConstField(serializers.CharField):
        pass

    ConstField.__name__ = f"Const{value.title()}Field"
    return ConstField


# ---------------------------------------------------------------------------------------------------
# Request
# ---------------------------------------------------------------------------------------------------

INSTRUCTIONS_HELP = ("What to ask about the state. A string is shown verbatim; an object or array is shown as compact "
                     "JSON. Optional: without it the model is asked which option fits the state best.")


class NoulCriteriaSerializer(serializers.Serializer):
    true = NullableTextField(required=False, help_text="What `true` means. Missing, null or empty → \"Yes\".")
    false = NullableTextField(required=False, help_text="What `false` means. Missing, null or empty → \"No\".")

    class Meta:
        ref_name = "NoulCriteria"


class NoulQuestionSerializer(serializers.Serializer):
    """A yes/no question, answered with P(true)."""

    type = _const("noul")(help_text="`noul`: a yes/no question.")
    instructions = NullableTextField(required=False, help_text=INSTRUCTIONS_HELP)
    criteria = NoulCriteriaSerializer(required=False, allow_null=True,
                                      help_text="Optional wording of the two sides; no other keys are allowed.")

    class Meta:
        ref_name = "NoulQuestion"


class ChoiceQuestionSerializer(serializers.Serializer):
    """Pick one of several options, answered with the most likely key and every option's probability."""

    type = _const("choice")(help_text="`choice`: pick one option.")
    instructions = NullableTextField(required=False, help_text=INSTRUCTIONS_HELP)
    criteria = serializers.DictField(
        child=NullableTextField(),
        help_text="Option key → description, 2 to `max_answers_per_question` entries, in the order to show them. "
                  "Keys are returned exactly as sent and stay hidden from the model unless the description is "
                  "null, in which case the model reads the key itself.")

    class Meta:
        ref_name = "ChoiceQuestion"


class ScoreQuestionSerializer(serializers.Serializer):
    """Place the state on an ordered scale, answered with the expected level index."""

    type = _const("score")(help_text="`score`: a level on an ordered scale.")
    instructions = NullableTextField(required=False, help_text=INSTRUCTIONS_HELP)
    criteria = serializers.ListField(
        child=TextField(), min_length=2,
        help_text="The levels, lowest first (2 to `max_answers_per_question`); each a string, object or array. "
                  "The object form `{\"0\": ...}` is rejected with 422.")

    class Meta:
        ref_name = "ScoreQuestion"


QuestionSerializer = PolymorphicProxySerializer(
    component_name="Question",
    serializers={"noul": NoulQuestionSerializer, "choice": ChoiceQuestionSerializer, "score": ScoreQuestionSerializer},
    resource_type_field_name="type",
)


class SystemOneRequestSerializer(serializers.Serializer):
    """Classify one state with up to `max_questions` typed questions. Other top-level fields are ignored."""

    model = ModelField(
        help_text="`jev-latest`, any `jev-*` alias, the public model id or the served id (see `GET /v1/models`). "
                  "Echoed in the response. Unknown → 422.")
    state = TextField(
        help_text="What the questions are about. A string is one user message. A non-empty array of objects that all "
                  "have `role` (or an object whose only key is `messages` holding one) is a chat transcript, kept as "
                  "sent: roles `system`, `user`, `assistant`, `tool`; text content only (images, audio, video → 422). "
                  "Any other object or array is shown to the model as compact JSON. `null` → 422.")
    questions = serializers.DictField(
        child=QuestionSerializer,
        help_text="Caller id → question. Ids are any non-empty strings, returned byte-for-byte in `answers` and never "
                  "shown to the model; answers do not depend on the ids, on the other questions or on their order.")

    class Meta:
        ref_name = "SystemOneRequest"


# ---------------------------------------------------------------------------------------------------
# Response
# ---------------------------------------------------------------------------------------------------

PROBABILITY_HELP = ("Softmax of the label log-probabilities (divided by `OPENJEV_TEMPERATURE`, default 1), "
                    "renormalised over this question's options; sums to 1.")
CONFIDENCE_HELP = ("How peaked the distribution is, from 0 (uniform) to 1 (certain): by default `1 − H(p)/ln n`; "
                   "with `OPENJEV_CONFIDENCE=typesafe`, TypeSafe's formulas. A property of the model's distribution, "
                   "**not** a calibrated probability of being correct.")


def _probability(**kwargs: Any) -> serializers.FloatField:
    return serializers.FloatField(min_value=0.0, max_value=1.0, **kwargs)


class NoulAnswerSerializer(serializers.Serializer):
    type = _const("noul")(help_text="`noul`.")
    noul = _probability(help_text="P(true). " + PROBABILITY_HELP)

    class Meta:
        ref_name = "NoulAnswer"


class ChoiceAnswerSerializer(serializers.Serializer):
    type = _const("choice")(help_text="`choice`.")
    choice = serializers.CharField(help_text="The most likely option key, exactly as sent (ties go to the first).")
    probabilities = serializers.DictField(child=_probability(), help_text="Option key → probability, in request "
                                                                          "order. " + PROBABILITY_HELP)
    confidence = _probability(help_text=CONFIDENCE_HELP)

    class Meta:
        ref_name = "ChoiceAnswer"


class ScoreAnswerSerializer(serializers.Serializer):
    type = _const("score")(help_text="`score`.")
    score = serializers.FloatField(min_value=0.0, help_text="Expected level index Σ i·p_i, from 0 to levels − 1.")
    legend = serializers.DictField(child=TextField(), help_text="Level index (`\"0\"`, `\"1\"`, ...) → the level "
                                                                "exactly as sent.")
    probabilities = serializers.DictField(child=_probability(), help_text="Level index → probability. "
                                                                          + PROBABILITY_HELP)
    confidence = _probability(help_text=CONFIDENCE_HELP)

    class Meta:
        ref_name = "ScoreAnswer"


AnswerSerializer = PolymorphicProxySerializer(
    component_name="Answer",
    serializers={"noul": NoulAnswerSerializer, "choice": ChoiceAnswerSerializer, "score": ScoreAnswerSerializer},
    resource_type_field_name="type",
)


class UsageSerializer(serializers.Serializer):
    input_tokens = serializers.IntegerField(
        min_value=0, help_text="Prompt tokens the backend read over the warm-up and every question (cache hits "
                               "included).")
    output_tokens = serializers.IntegerField(min_value=1, help_text="Backend generations: questions + 1.")

    class Meta:
        ref_name = "Usage"


class SystemOneResponseSerializer(serializers.Serializer):
    model = serializers.CharField(help_text="The `model` of the request, as sent.")
    answers = serializers.DictField(child=AnswerSerializer,
                                    help_text="Question id → answer: the same ids as the request, in the same order.")
    usage = UsageSerializer(help_text="What the evaluation cost the backend.")

    class Meta:
        ref_name = "SystemOneResponse"


# ---------------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------------


class ValidationProblemSerializer(serializers.Serializer):
    loc = LocField(help_text="Where the problem is, starting with `body`.")
    msg = serializers.CharField(help_text="What is wrong, for people.")
    type = serializers.CharField(help_text="What is wrong, for programs (e.g. `missing`, `too_long`).")

    class Meta:
        ref_name = "ValidationProblem"


class ValidationErrorSerializer(serializers.Serializer):
    """422: every problem found, before any model work."""

    detail = ValidationProblemSerializer(many=True, help_text="Every problem found.")

    class Meta:
        ref_name = "ValidationError"


class ApiErrorDetailSerializer(serializers.Serializer):
    error_type = ErrorTypeField(help_text="What kind of error, for programs; one value per row of the error table.")
    message = serializers.CharField(help_text="What happened, for people.")

    class Meta:
        ref_name = "ApiErrorDetail"


class ApiErrorSerializer(serializers.Serializer):
    """Every non-422 error: JSON, never HTML or a redirect."""

    detail = ApiErrorDetailSerializer(help_text="The error.")

    class Meta:
        ref_name = "ApiError"


# ---------------------------------------------------------------------------------------------------
# Other endpoints
# ---------------------------------------------------------------------------------------------------


class ModelDescriptionSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="A value for `model`.")
    description = serializers.CharField(help_text="What the name stands for.")
    release_date = serializers.CharField(help_text="`YYYY-MM-DD`, or `unknown`.")

    class Meta:
        ref_name = "ModelDescription"


class OpenAIModelSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="A value for `model`.")
    object = _const("model")(help_text="Always `model`.")
    owned_by = serializers.CharField(help_text="Always `openjev`.")

    class Meta:
        ref_name = "OpenAIModel"


class ModelsResponseSerializer(serializers.Serializer):
    """TypeSafe's `models` list and OpenAI's `data` list, in one body, so both kinds of client read it."""

    models = ModelDescriptionSerializer(many=True, help_text="The alias first, then the public model id.")
    object = _const("list")(help_text="Always `list`.")
    # A field named like Serializer.data: DRF's metaclass moves it into `fields`, so the property is intact.
    data = OpenAIModelSerializer(many=True, help_text="The same models, OpenAI-style, then every classifier "  # type: ignore[assignment]
                                                      "defined in the admin (names for `POST /v1/classify`).")

    class Meta:
        ref_name = "ModelsResponse"


class LimitsSerializer(serializers.Serializer):
    max_questions = serializers.IntegerField(min_value=1, help_text="Questions per request.")
    max_answers_per_question = serializers.IntegerField(min_value=2, help_text="Choice options or score levels.")
    max_body_bytes = serializers.IntegerField(min_value=1, help_text="Request body after decompression.")
    max_input_tokens = serializers.IntegerField(min_value=1, help_text="Tokens of one question's prompt.")
    max_total_input_tokens = serializers.IntegerField(min_value=1, help_text="Tokens over the warm-up and every "
                                                                             "question.")
    max_concurrent_requests = serializers.IntegerField(min_value=1, help_text="Evaluations at once in one process; "
                                                                              "more get 529.")
    max_concurrent_branches = serializers.IntegerField(min_value=1, help_text="Backend calls at once in one process.")
    request_timeout_seconds = serializers.FloatField(min_value=0.0, help_text="Longest evaluation before 504.")

    class Meta:
        ref_name = "Limits"


class HealthSerializer(serializers.Serializer):
    status = HealthStatusField(help_text="`ok` when the backend answers its health check, else `unavailable`.")
    backend = serializers.CharField(help_text="`local` (embedded llama.cpp) or `sglang`.")
    model = serializers.CharField(required=False, help_text="The served model, once the backend answers.")
    startup_seconds = serializers.FloatField(allow_null=True, help_text="How long the engine took to start; null "
                                                                        "while it is starting.")
    message = serializers.CharField(required=False, help_text="Why the service is unavailable.")

    class Meta:
        ref_name = "Health"


class LiveSerializer(serializers.Serializer):
    status = _const("ok")(help_text="Always `ok`.")

    class Meta:
        ref_name = "Live"


# ---------------------------------------------------------------------------------------------------
# Named examples
# ---------------------------------------------------------------------------------------------------

README_REQUEST: dict[str, Any] = {
    "model": "jev-latest",
    "state": "Hi, I was charged twice for my March invoice and the refund still hasn't arrived. Fix it today!",
    "questions": {
        "refund": {"type": "noul", "instructions": "Is the customer asking for money back?"},
        "team": {"type": "choice", "instructions": "Which team should handle this ticket?",
                 "criteria": {"Billing": "Payments, invoices, refunds", "Technical": "Bugs, outages",
                              "Sales": "Pricing, upgrades"}},
        "anger": {"type": "score", "instructions": "How frustrated is the customer?",
                  "criteria": ["Calm", "Frustrated", "Very angry"]},
    },
}

CHAT_REQUEST: dict[str, Any] = {
    "model": "jev-latest",
    "state": [
        {"role": "system", "content": "You are the support assistant of Acme Cloud."},
        {"role": "user", "content": "My deploys have failed since this morning with error 503."},
        {"role": "assistant", "content": "Sorry about that! Which region are you deploying to?"},
        {"role": "user", "content": "eu-west-1. Third time this month, I'm looking at other providers."},
    ],
    "questions": {
        "churn_risk": {"type": "noul", "instructions": "Is the customer considering leaving?"},
        "topic": {"type": "choice", "instructions": "What is the conversation about?",
                  "criteria": {"outage": "A service is down or failing", "billing": "Invoices, payments, refunds",
                               "how_to": "A question about using the product"}},
        "resolved": {"type": "noul", "instructions": "Has the assistant already solved the problem?",
                     "criteria": {"true": "Solved", "false": "Still open"}},
    },
}

SCORE_10_REQUEST: dict[str, Any] = {
    "model": "jev-latest",
    "state": "The pasta was cold and the waiter forgot our drinks, but the tiramisu was the best I have ever had.",
    "questions": {
        "rating": {"type": "score", "instructions": "Rate the overall experience this review describes.",
                   "criteria": ["1 - terrible", "2", "3", "4", "5 - mixed", "6", "7", "8", "9", "10 - perfect"]},
    },
}

STRUCTURED_REQUEST: dict[str, Any] = {
    "model": "jev-latest",
    "state": {
        "order_id": "A-1042",
        "customer": {"name": "Lena", "tier": "gold", "orders": 14, "returns": 0},
        "items": [{"sku": "KB-01", "name": "Mechanical keyboard", "qty": 1, "price_eur": 129.0}],
        "message": "Arrived with two broken keys. I want a replacement, not my money back.",
    },
    "questions": {
        "wants": {"type": "choice", "instructions": "What does the customer want?",
                  "criteria": {"replacement": "A new item sent in place of the broken one",
                               "refund": "Their money back", "repair": None}},
        "priority": {"type": "score",
                     "instructions": {"task": "How urgently should support act?",
                                      "consider": ["customer tier", "order history"]},
                     "criteria": ["low", "normal", {"level": "high", "within_hours": 4}]},
        "damaged": {"type": "noul", "instructions": "Does the message report damage?",
                    "criteria": {"true": {"label": "damaged", "e.g.": ["broken", "cracked"]}, "false": None}},
    },
}

REQUEST_EXAMPLES = [
    OpenApiExample("ReadmeRequest", value=README_REQUEST, request_only=True,
                   summary="The README request: one of each type",
                   description="A support ticket with a yes/no, a choice and a 3-level score question."),
    OpenApiExample("ChatTranscriptState", value=CHAT_REQUEST, request_only=True,
                   summary="A chat transcript as the state",
                   description="An array of `{role, content}` messages is kept as a conversation, not flattened."),
    OpenApiExample("Score10Levels", value=SCORE_10_REQUEST, request_only=True,
                   summary="A 10-level score",
                   description="Levels lowest first; the answer's `score` is the expected index (0–9)."),
    OpenApiExample("StructuredState", value=STRUCTURED_REQUEST, request_only=True,
                   summary="A structured state, instructions and criteria",
                   description="Objects are shown to the model as compact JSON; a null choice description shows "
                               "the key itself."),
]

README_RESPONSE: dict[str, Any] = {
    "model": "jev-latest",
    "answers": {
        "refund": {"type": "noul", "noul": 0.93},
        "team": {"type": "choice", "choice": "Billing",
                 "probabilities": {"Billing": 0.91, "Technical": 0.06, "Sales": 0.03}, "confidence": 0.67},
        "anger": {"type": "score", "score": 1.52, "legend": {"0": "Calm", "1": "Frustrated", "2": "Very angry"},
                  "probabilities": {"0": 0.04, "1": 0.4, "2": 0.56}, "confidence": 0.25},
    },
    "usage": {"input_tokens": 371, "output_tokens": 4},
}


EXAMPLE_REQUEST_ID = "req_5f0c3a9e2b7d4c18a6e1f4b2d9c07a35"

# Errors both endpoints answer the same way (only the body's shape differs), documented once. A fault's
# message is the same for every cause, plus the request id under which operators find the cause.
SHARED_ERRORS: dict[int, tuple[str, str]] = {
    401: ("authentication_error", "missing API key: send Authorization: Bearer <key>"),
    408: ("request_timeout", "the body did not arrive within 60 s"),
    413: ("request_too_large", "the body is over 2097152 bytes (decoded)"),
    415: ("unsupported_media_type", "Content-Encoding 'br' is not supported; use gzip, zstd or none"),
    **{status: (error_type, f"{PUBLIC_MESSAGES[status]} (request id {EXAMPLE_REQUEST_ID})")
       for status, error_type in ((500, "internal_error"), (502, "backend_error"), (503, "backend_unavailable"),
                                  (504, "timeout"))},
    529: ("overloaded", "16 evaluations are active (limit 16); retry shortly"),
}


def _error_example(status: int, error_type: str, message: str) -> OpenApiExample:
    return OpenApiExample(error_type, value={"detail": {"error_type": error_type, "message": message}},
                          response_only=True, status_codes=[str(status)])


RESPONSE_EXAMPLES = [
    OpenApiExample("ReadmeAnswer", value=README_RESPONSE, response_only=True, status_codes=["200"],
                   summary="Answers to the README request"),
    OpenApiExample("Validation", response_only=True, status_codes=["422"], value={"detail": [
        {"loc": ["body", "questions", "team", "criteria"], "msg": "A choice needs 2 to 255 options, got 1",
         "type": "too_short"},
        {"loc": ["body", "model"], "msg": "Field required", "type": "missing"}]}),
    _error_example(400, "invalid_request", "the body is not JSON: Expecting value: line 1 column 1 (char 0)"),
    *(_error_example(status, error_type, message) for status, (error_type, message) in SHARED_ERRORS.items()),
]

# ---------------------------------------------------------------------------------------------------
# Headers and responses
# ---------------------------------------------------------------------------------------------------

REQUEST_ID_HEADER = OpenApiParameter(
    "x-typesafe-request-id", str, OpenApiParameter.HEADER, required=True, response=True,
    description="This request's id (`req_…`), on every response, errors included; an evaluation is stored under "
                "it. Quote it to the operator: a 5xx names it in its message too.")
AUTH_HEADER = OpenApiParameter("WWW-Authenticate", str, OpenApiParameter.HEADER, required=True, response=[401],
                               description="`Bearer`.")

RESPONSE_HEADERS = [
    REQUEST_ID_HEADER,
    OpenApiParameter("x-openjev-model", str, OpenApiParameter.HEADER, required=True, response=[200],
                     description="The model the backend actually served."),
    OpenApiParameter("x-openjev-prefix-tokens", int, OpenApiParameter.HEADER, required=True, response=[200],
                     description="Length in tokens of the prefix shared by every question (state and chat template)."),
    OpenApiParameter("x-openjev-cached-tokens", int, OpenApiParameter.HEADER, required=False, response=[200],
                     description="Prompt tokens the backend served from its prefix cache over all questions. "
                                 "Absent when the backend does not report it."),
    OpenApiParameter("Server-Timing", str, OpenApiParameter.HEADER, required=True, response=[200],
                     description="`prepare;dur=…, prefill;dur=…, branches;dur=…` in milliseconds: prompt building, "
                                 "the shared-prefix warm-up, and the questions."),
    OpenApiParameter("Retry-After", int, OpenApiParameter.HEADER, required=True, response=[503, 529],
                     description="Seconds to wait before retrying."),
    AUTH_HEADER,
]


def _error(description: str) -> OpenApiResponse:
    return OpenApiResponse(ApiErrorSerializer, description=description)


KEY_MISSING = _error("Auth is on and the Bearer key is missing or wrong (`authentication_error`).")


SYSTEMONE_RESPONSES: dict[int, OpenApiResponse] = {
    200: OpenApiResponse(SystemOneResponseSerializer, description="One answer per question, keyed by the question "
                                                                  "ids of the request."),
    400: _error("The body is not JSON, not UTF-8, or a corrupt gzip/zstd stream (`invalid_request`)."),
    401: KEY_MISSING,
    408: _error("The body did not arrive in time (`request_timeout`); the connection is closed."),
    413: _error("The body, after decompression, is over `max_body_bytes` (`request_too_large`)."),
    415: _error("The `Content-Encoding` is not gzip, zstd or identity (`unsupported_media_type`)."),
    422: OpenApiResponse(ValidationErrorSerializer,
                         description="Validation failed: shape, counts, unknown model, chat roles or content, a "
                                     "transcript the model's chat template cannot render, text that is not valid "
                                     "Unicode (a lone surrogate), a number beyond a double, nesting over 128 levels, "
                                     "or a token budget. Nothing was run."),
    500: _error("A bug on our side (`internal_error`)."),
    502: _error("The backend answered with an error or malformed log-probabilities (`backend_error`)."),
    503: _error("The backend is unreachable or still starting (`backend_unavailable`); see `Retry-After`."),
    504: _error("The evaluation took longer than `request_timeout_seconds` (`timeout`)."),
    529: _error("More than `max_concurrent_requests` evaluations are running in this process (`overloaded`); "
                "retry after `Retry-After`."),
}

SYSTEMONE_DESCRIPTION = """\
Answers every question about `state` from the model's log-probabilities for single-token answer labels at the first
output position: no text is generated. The state is rendered once with the model's chat template and cached by the
backend (the warm-up); each question then adds only its own short suffix, so N questions cost N + 1 backend
generations that share one prefix.

Bodies may be sent with `Content-Encoding: zstd` or `gzip` (the official SDK compresses bodies of 1 KiB and more).
Everything the caller can fix is a 4xx, checked before any model work; 5xx is kept for the backend and for bugs, so
clients may retry any 5xx (`Retry-After` is set on 503 and 529).
"""

# ---------------------------------------------------------------------------------------------------
# Decorators for the views
# ---------------------------------------------------------------------------------------------------

systemone_schema = extend_schema(
    operation_id="systemone",
    summary="Evaluate typed questions about a state",
    description=SYSTEMONE_DESCRIPTION,
    tags=["Evaluation"],
    request=SystemOneRequestSerializer,
    responses=SYSTEMONE_RESPONSES,
    examples=[*REQUEST_EXAMPLES, *RESPONSE_EXAMPLES],
    parameters=RESPONSE_HEADERS,
    auth=OPTIONAL_AUTH,
)

models_schema = extend_schema(
    operation_id="listModels",
    summary="List the accepted model names",
    description="The values `model` accepts: the alias first, then the public model id (any other `jev-*` alias and "
                "the served id are accepted too). Weight repositories are not listed.",
    tags=["Models"],
    responses={200: OpenApiResponse(ModelsResponseSerializer, description="The models."),
               401: KEY_MISSING, 500: _error("A bug on our side (`internal_error`).")},
    parameters=[REQUEST_ID_HEADER, AUTH_HEADER],
    auth=OPTIONAL_AUTH,
)

limits_schema = extend_schema(
    operation_id="getLimits",
    summary="Admission limits of this deployment",
    description="Every limit a request is checked against, from the server's `OPENJEV_*` settings.",
    tags=["Service"],
    responses={200: OpenApiResponse(LimitsSerializer, description="The limits."),
               401: KEY_MISSING, 500: _error("A bug on our side (`internal_error`).")},
    parameters=[REQUEST_ID_HEADER, AUTH_HEADER],
    auth=OPTIONAL_AUTH,
)

health_schema = extend_schema(
    operation_id="health",
    summary="Readiness: is the backend answering?",
    description="200 when the backend answers its health check, else 503 (starting, failed to start, or unreachable). "
                "Never behind auth; meant for load balancers.",
    tags=["Service"],
    responses={200: OpenApiResponse(HealthSerializer, description="Ready.",
                                    examples=[OpenApiExample("ok", value={"status": "ok", "backend": "sglang",
                                                                          "model": "Qwen/Qwen3.6-35B-A3B",
                                                                          "startup_seconds": 2.1})]),
               503: OpenApiResponse(HealthSerializer, description="Not ready; see `Retry-After`."),
               500: _error("A bug on our side (`internal_error`).")},
    parameters=[REQUEST_ID_HEADER,
                OpenApiParameter("Retry-After", int, OpenApiParameter.HEADER, required=True, response=[503],
                                 description="Seconds to wait before probing again.")],
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

# ---------------------------------------------------------------------------------------------------
# POST /v1/classify (SGLang's and vLLM's classification API, over classifiers saved in the admin)
# ---------------------------------------------------------------------------------------------------


@extend_schema_field({"type": ["string", "array"], "items": {"type": "string"}, "minItems": 1})
class ClassifyInputField(serializers.JSONField):
    """One text, or a list of texts (one result each, in order)."""


@extend_schema_field({"type": "null"})
class NullField(serializers.JSONField):
    """Always null."""


@extend_schema_field({"type": "integer", "const": 0, "enum": [0]})
class ZeroField(serializers.IntegerField):
    """Always 0."""


class ClassifyRequestSerializer(serializers.Serializer):
    """Classify one text or a list of texts with a classifier saved in the admin. Other fields (`user`, `rid`,
    `priority`, ...) are ignored."""

    model = serializers.CharField(help_text="A classifier's name, as defined in the admin (`GET /v1/models` lists "
                                            "them in `data`, after the model names). Unknown → 404.")
    input = ClassifyInputField(help_text="The text to classify, or a list of 1 to `max_classify_inputs` texts (64 by "
                                         "default), classified concurrently. Token ids are not supported.")

    class Meta:
        ref_name = "ClassifyRequest"


class ClassifyResultSerializer(serializers.Serializer):
    index = serializers.IntegerField(min_value=0, help_text="Position of the text in `input` (0 for a single text).")
    label = serializers.CharField(  # type: ignore[assignment]  # a field named like Field.label, as `data` above
        help_text="The most likely label (ties go to the first). A noul classifier answers `true` or `false`; a "
                  "score classifier the name of a level.")
    probs = serializers.ListField(child=_probability(), min_length=2,
                                  help_text="One probability per label, in the classifier's label order (a noul "
                                            "classifier: [P(true), P(false)]; a score: levels lowest first). "
                                            + PROBABILITY_HELP)
    num_classes = serializers.IntegerField(min_value=2, help_text="The number of labels (the length of `probs`).")

    class Meta:
        ref_name = "ClassifyResult"


class ClassifyUsageSerializer(serializers.Serializer):
    prompt_tokens = serializers.IntegerField(min_value=0, help_text="Prompt tokens the backend read over the warm-up "
                                                                    "and branch of every input (cache hits included).")
    total_tokens = serializers.IntegerField(min_value=0, help_text="The same as `prompt_tokens`.")
    completion_tokens = ZeroField(help_text="Always 0: nothing is generated for the caller.")
    prompt_tokens_details = NullField(help_text="Always null.")

    class Meta:
        ref_name = "ClassifyUsage"


class ClassifyResponseSerializer(serializers.Serializer):
    """The SGLang / vLLM classification response."""

    id = serializers.CharField(help_text="`classify-<hex>`; also the `x-typesafe-request-id` header and the stored "
                                         "evaluation's request id.")
    object = _const("list")(help_text="Always `list`.")
    created = serializers.IntegerField(min_value=0, help_text="Unix time (seconds) when the request arrived.")
    model = serializers.CharField(help_text="The classifier's name, as requested.")
    # A field named like Serializer.data: DRF's metaclass moves it into `fields`, so the property is intact.
    data = ClassifyResultSerializer(many=True, help_text="One result per input text, in input order.")  # type: ignore[assignment]
    usage = ClassifyUsageSerializer(help_text="What the request cost the backend.")

    class Meta:
        ref_name = "ClassifyResponse"


class ClassifyErrorSerializer(serializers.Serializer):
    """Every error of `POST /v1/classify`, in SGLang's and vLLM's shape."""

    error = serializers.CharField(help_text="What happened, for people.")
    type = serializers.CharField(help_text="What kind of error, for programs: `invalid_request` (400), "
                                           "`authentication_error` (401), `not_found` (404), `overloaded` (529), "
                                           "`backend_unavailable` or `service_unavailable` (503), `backend_error` "
                                           "(502), `timeout` (504), ... as in the error table.")
    code = serializers.IntegerField(help_text="The HTTP status, repeated.")

    class Meta:
        ref_name = "ClassifyError"


CLASSIFY_REQUEST: dict[str, Any] = {
    "model": "sentiment",
    "input": ["Loved the new café—coffee was great.", "The delivery was late and the box was crushed."],
}

CLASSIFY_RESPONSE: dict[str, Any] = {
    "id": "classify-9bf17f2847b046c7b2d5495f4b4f9682",
    "object": "list",
    "created": 1745383213,
    "model": "sentiment",
    "data": [{"index": 0, "label": "positive", "probs": [0.94, 0.02, 0.04], "num_classes": 3},
             {"index": 1, "label": "negative", "probs": [0.01, 0.96, 0.03], "num_classes": 3}],
    "usage": {"prompt_tokens": 412, "total_tokens": 412, "completion_tokens": 0, "prompt_tokens_details": None},
}


def _classify_error(status: int, error_type: str, message: str) -> OpenApiExample:
    return OpenApiExample(f"classify_{error_type}", value={"error": message, "type": error_type, "code": status},
                          response_only=True, status_codes=[str(status)])


def _classify_failure(description: str) -> OpenApiResponse:
    return OpenApiResponse(ClassifyErrorSerializer, description=description)


CLASSIFY_DESCRIPTION = """\
SGLang's and vLLM's classification API (`{"model", "input"}` in; `data` with `label`, `probs` and `num_classes`
out), served by the language model instead of a fine-tuned classifier: `model` names a **classifier** defined in the
admin (`/admin/evaluations/classifier/`: instructions and an ordered label set), which is in effect a saved `choice`,
`noul` or `score` question. Each text is classified exactly as a one-question `POST /v1/systemone` call, and all
texts of a request run concurrently under one admission.

The example needs a classifier named `sentiment` with the labels `positive`, `negative` and `neutral`, in that order.
Errors are `{"error", "type", "code"}`, as SGLang and vLLM send them.
"""

classify_schema = extend_schema(
    operation_id="classify",
    summary="Classify texts with a saved classifier",
    description=CLASSIFY_DESCRIPTION,
    tags=["Classification"],
    request=ClassifyRequestSerializer,
    responses={
        200: OpenApiResponse(ClassifyResponseSerializer, description="One result per input text, in order."),
        400: _classify_failure("The body is not JSON or not valid: `model` or `input` missing or of the wrong type, "
                               "too many texts, or a text over the token budgets (`invalid_request`)."),
        401: _classify_failure("Auth is on and the Bearer key is missing or wrong (`authentication_error`)."),
        404: _classify_failure("No classifier has this name (`not_found`)."),
        408: _classify_failure("The body did not arrive in time (`request_timeout`); the connection is closed."),
        413: _classify_failure("The body, after decompression, is over `max_body_bytes` (`request_too_large`)."),
        415: _classify_failure("The `Content-Encoding` is not gzip, zstd or identity (`unsupported_media_type`)."),
        500: _classify_failure("A bug on our side (`internal_error`)."),
        502: _classify_failure("The backend answered with an error or malformed log-probabilities (`backend_error`)."),
        503: _classify_failure("The backend (or the classifier table) is unavailable; see `Retry-After`."),
        504: _classify_failure("The request took longer than `request_timeout_seconds` (`timeout`)."),
        529: _classify_failure("More than `max_concurrent_requests` requests are running in this process "
                                "(`overloaded`); retry after `Retry-After`."),
    },
    examples=[
        OpenApiExample("SentimentClassifier", value=CLASSIFY_REQUEST, request_only=True,
                       summary="Two reviews, one sentiment classifier",
                       description="Needs a classifier `sentiment` with labels positive, negative, neutral."),
        OpenApiExample("SentimentAnswer", value=CLASSIFY_RESPONSE, response_only=True, status_codes=["200"],
                       summary="One result per review"),
        _classify_error(400, "invalid_request", "`input` is required: a text, or a list of texts"),
        _classify_error(404, "not_found", "no classifier named 'sentimnet'; GET /v1/models lists them after the "
                                          "model names"),
        *(_classify_error(status, error_type, message) for status, (error_type, message) in SHARED_ERRORS.items()),
    ],
    parameters=[
        OpenApiParameter("x-typesafe-request-id", str, OpenApiParameter.HEADER, required=True, response=True,
                         description="The request's id (`classify-…`, the body's `id` on a 200), on every response, "
                                     "errors included; also stored with it, and named in a 5xx's message."),
        OpenApiParameter("x-openjev-model", str, OpenApiParameter.HEADER, required=True, response=[200],
                         description="The language model the backend actually served."),
        OpenApiParameter("Retry-After", int, OpenApiParameter.HEADER, required=True, response=[503, 529],
                         description="Seconds to wait before retrying."),
        AUTH_HEADER,
    ],
    auth=OPTIONAL_AUTH,
)

# ---------------------------------------------------------------------------------------------------
# Document-level parts
# ---------------------------------------------------------------------------------------------------

API_DESCRIPTION = """\
Typed classification from a language model's label log-probabilities, in the Jev / TypeSafe **System One** wire
format: the official `typesafe-sdk` and OpenAI-style clients work by changing their base URL.

Three question types: **noul** (yes/no → P(true)), **choice** (one of 2 to `max_answers_per_question` options,
255 by default → the most likely key and every option's probability) and **score** (a level on an ordered scale →
the expected level index). `confidence` says how peaked a distribution is; it is not a calibrated probability of
being right.

```python
from typesafe_sdk import Choice, Noul, TypeSafeClient

url = "http://127.0.0.1:8000"
with TypeSafeClient(api_key="any", base_url=url) as client:
    result = client.system_one(
        state="I was charged twice!",
        questions={
            "refund": Noul(instructions="Refund request?"),
            "team": Choice(criteria={"Billing": None, "Tech": None}),
        },
    )
print(result.nouls["refund"].noul, result.choices["team"].choice)
```

**Classifiers** saved in the admin are also served through SGLang's and vLLM's `POST /v1/classify`
(`{"model": <classifier>, "input": text or [texts]}`), answered the same way.

**Auth** is off unless the server sets `OPENJEV_API_KEY` (or requires issued keys); then every `/v1/*` route
(OPTIONS included) needs `Authorization: Bearer <key>`, and only `/health` and `/health/live` are open. Any Bearer
value is accepted while auth is off.

**Errors**: 422 lists every validation problem as `{"detail": [{"loc", "msg", "type"}]}`; every other error is
`{"detail": {"error_type", "message"}}`, as JSON (never HTML, never a redirect). `POST /v1/classify` answers its
errors in SGLang's and vLLM's shape, `{"error", "type", "code"}`. Every response carries `x-typesafe-request-id`;
a 5xx's message is the same for every cause of its kind and names that id, which is where the operator finds the
cause.
"""

TAGS = [
    {"name": "Evaluation", "description": "Typed questions about a state."},
    {"name": "Classification", "description": "SGLang / vLLM `POST /v1/classify` over classifiers saved in the admin."},
    {"name": "Models", "description": "Names accepted as `model`."},
    {"name": "Service", "description": "Limits and health probes."},
]

SECURITY_SCHEMES = {
    SECURITY_SCHEME: {
        "type": "http", "scheme": "bearer",
        "description": "Needed only when the server has auth on (`OPENJEV_API_KEY` set, or issued keys required). "
                       "The official SDK always sends one; any value is accepted while auth is off.",
    },
}


def _component(result: dict[str, Any], name: str) -> dict[str, Any]:
    schema: dict[str, Any] = result["components"]["schemas"][name]
    return schema


def schema_postprocess(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular hook: what serializers cannot express, and this deployment's limits.

    Runs once per generated document (the served one is generated once per process).
    """
    config = settings.OPENJEV
    result = copy.deepcopy(result)
    result["info"]["description"] = API_DESCRIPTION
    result["info"]["license"] = {"name": "Apache-2.0", "identifier": "Apache-2.0"}
    result["tags"] = TAGS
    result.setdefault("components", {})["securitySchemes"] = SECURITY_SCHEMES

    questions = _component(result, "SystemOneRequest")["properties"]["questions"]
    questions.update(minProperties=1, maxProperties=config.max_questions, propertyNames={"minLength": 1})
    _component(result, "SystemOneRequest")["additionalProperties"] = True
    choice = _component(result, "ChoiceQuestion")["properties"]["criteria"]
    choice.update(minProperties=2, maxProperties=config.max_answers)
    score = _component(result, "ScoreQuestion")["properties"]["criteria"]
    score.update(maxItems=config.max_answers)
    noul_criteria = _component(result, "NoulCriteria")
    noul_criteria["additionalProperties"] = False
    _component(result, "Question")["description"] = ("One question, discriminated by `type`; any other type (e.g. "
                                                     "`box`, `boolean`) is rejected with 422.")
    _component(result, "Answer")["description"] = "One answer, of its question's type."
    _component(result, "ClassifyRequest")["properties"]["input"].update(maxItems=config.max_classify_inputs)
    _component(result, "ClassifyRequest")["additionalProperties"] = True
    return result

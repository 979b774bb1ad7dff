"""`POST /v1/decisions` (OpenAI's Decisions API) as documented: request, response, errors and examples.

Documentation only, like `api/systemone/openapi.py`: the body is validated by
`api/decisions/parsing.py`; `tests/docs/test_schema.py` holds the two together, and every
example request here evaluates.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers

from api.decisions.errors import OPENAI_SHAPE
from api.openapi.errors import CROSS_SITE_DESCRIPTION
from api.openapi.fields import ModelField, const_field, probability_field
from api.openapi.operations import OPTIONAL_AUTH, RESPONSE_HEADERS
from api.plumbing.api_error import ApiError
from api.plumbing.error_responses import error_body

INSTRUCTIONS_HELP = (
    "What to ask about the input: a string, or a list of `input_text` / `input_json` / `input_image` parts "
    "(texts joined with newlines; JSON as compact text; an image where it stands, in this question's branch "
    "only, where the deployment takes images: `max_images`). An empty string asks the type's own question, as "
    "System One's empty instructions do."
)
NAME_HELP = "Returned with the answer; `POST /v1/feedback` finds the answer by it (or by the question's index)."

_PART = {"type": "object", "required": ["type"], "properties": {"type": {"type": "string"}}}


@extend_schema_field({"oneOf": [{"type": "string"}, {"type": "array", "minItems": 1, "items": _PART}]})
class InstructionsField(serializers.JSONField):
    """A string, or text, JSON and image parts."""


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string"},
            {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "description": "A `message` (role user, developer, system or assistant; content a string or "
                    "parts `input_text`, `input_image` with a data: URL (or an https URL of a host the "
                    "operator allows), `input_json`), "
                    "`function_call`, `function_call_output`, `custom_tool_call` or "
                    "`custom_tool_call_output` item.",
                },
            },
        ]
    }
)
class InputField(serializers.JSONField):
    """A string, or an ordered list of input items."""


@extend_schema_field({"type": ["string", "boolean"]})
class ValueField(serializers.JSONField):
    """A choice value: a string or a boolean, which keeps its JSON type in the answer."""


class DecisionPredicateSerializer(serializers.Serializer):
    """How likely a statement about the input is true: answered with `probability`."""

    type = const_field("predicate")(help_text="`predicate`: is a statement about the input true?")
    instructions = InstructionsField(help_text=INSTRUCTIONS_HELP)
    name = serializers.CharField(required=False, help_text=NAME_HELP)


class DecisionChoiceOptionSerializer(serializers.Serializer):
    value = ValueField(help_text="Returned as `choice`; the model reads the description instead when there is one.")
    description = serializers.CharField(required=False, help_text="What the model reads for this choice.")


class DecisionChoiceSerializer(serializers.Serializer):
    """Pick one of the choices (2 to `max_choices`, unique; `"true"` and `true` are different choices)."""

    type = const_field("choice")(help_text="`choice`: pick one of the choices.")
    instructions = InstructionsField(help_text=INSTRUCTIONS_HELP)
    name = serializers.CharField(required=False, help_text=NAME_HELP)
    choices = DecisionChoiceOptionSerializer(
        many=True, help_text="2 to `max_choices` choices, in the order to show them."
    )


class DecisionLevelSerializer(serializers.Serializer):
    label = serializers.CharField(help_text="What the model reads (then ` — description`).")  # type: ignore[assignment]
    description = serializers.CharField(required=False, help_text="What the level means, read after its label.")


class DecisionScoreSerializer(serializers.Serializer):
    """Rate the input on ordered levels, lowest first: answered with the expected level index."""

    type = const_field("score")(help_text="`score`: rate on ordered levels.")
    instructions = InstructionsField(help_text=INSTRUCTIONS_HELP)
    name = serializers.CharField(required=False, help_text=NAME_HELP)
    levels = DecisionLevelSerializer(many=True, help_text="2 to `max_levels` (10) levels, lowest first.")


QUESTION = PolymorphicProxySerializer(
    component_name="DecisionQuestion",
    resource_type_field_name="type",
    many=False,
    serializers={
        "predicate": DecisionPredicateSerializer,
        "choice": DecisionChoiceSerializer,
        "score": DecisionScoreSerializer,
    },
)


class DecisionCacheOptionsSerializer(serializers.Serializer):
    mode = serializers.ChoiceField(choices=["implicit", "explicit"], required=False, allow_null=True)
    ttl = serializers.ChoiceField(choices=["30m"], required=False)


class DecisionsRequestSerializer(serializers.Serializer):
    model = ModelField(help_text="`jev-latest` (or any `jev-*` alias), the public model id or the served id.")
    input = InputField(help_text="What every question is about: a string, or messages and tool calls in order.")
    questions = serializers.ListField(
        child=QUESTION,
        min_length=1,
        help_text="1 to `decisions.max_questions` questions (`GET /v1/limits`; `OPENJEV_MAX_DECISIONS_QUESTIONS`, "
        "400 by default, as OpenAI's API); answers come back in the same order.",
    )
    prompt_cache_key = serializers.CharField(
        required=False,
        allow_null=True,
        help_text="Stored with the evaluation; the backend caches every shared prefix on its own.",
    )
    prompt_cache_options = DecisionCacheOptionsSerializer(
        required=False, allow_null=True, help_text="Accepted and checked; a no-op here (breakpoints too)."
    )
    safety_identifier = serializers.CharField(
        required=False,
        allow_null=True,
        max_length=64,
        help_text="Your id of your end user, stored and shown in the admin.",
    )


ANSWER_NAME_HELP = "The question's `name`, null when it had none."
CONFIDENCE_HELP = (
    "How peaked the distribution is: 1 − normalised entropy by default (`OPENJEV_CONFIDENCE`). This is "
    "**not** a calibrated probability of being correct."
)


class DecisionPredicateAnswerSerializer(serializers.Serializer):
    type = const_field("predicate")(help_text="`predicate`.")
    name = serializers.CharField(allow_null=True, help_text=ANSWER_NAME_HELP)
    probability = probability_field(help_text="P(true).")


class DecisionChoiceProbabilitySerializer(serializers.Serializer):
    value = ValueField(help_text="A choice's value, with its JSON type.")
    probability = probability_field(help_text="Its probability; they sum to 1.")


class DecisionChoiceAnswerSerializer(serializers.Serializer):
    type = const_field("choice")(help_text="`choice`.")
    name = serializers.CharField(allow_null=True, help_text=ANSWER_NAME_HELP)
    choice = ValueField(help_text="The most likely value (ties: the first).")
    confidence = probability_field(help_text=CONFIDENCE_HELP)
    probabilities = DecisionChoiceProbabilitySerializer(many=True, help_text="Every choice, in the request's order.")


class DecisionScoreProbabilitySerializer(serializers.Serializer):
    value = serializers.IntegerField(help_text="The level's index.")
    label = serializers.CharField(help_text="The level's label.")  # type: ignore[assignment]
    probability = probability_field(help_text="Its probability; they sum to 1.")


class DecisionScoreAnswerSerializer(serializers.Serializer):
    type = const_field("score")(help_text="`score`.")
    name = serializers.CharField(allow_null=True, help_text=ANSWER_NAME_HELP)
    score = serializers.FloatField(help_text="The expected level index, Σ i·p_i.")
    confidence = probability_field(help_text=CONFIDENCE_HELP)
    probabilities = DecisionScoreProbabilitySerializer(many=True, help_text="Every level, lowest first.")


class DecisionRefusalAnswerSerializer(serializers.Serializer):
    """The model did not answer with a label: its label mass was under `OPENJEV_REFUSAL_LABEL_MASS`."""

    type = const_field("refusal")(help_text="`refusal`.")
    name = serializers.CharField(allow_null=True, help_text=ANSWER_NAME_HELP)


class DecisionInputTokensDetailsSerializer(serializers.Serializer):
    cached_tokens = serializers.IntegerField(help_text="Prompt tokens the backend served from its prefix cache.")
    cache_write_tokens = serializers.IntegerField(help_text="Always 0: the backends do not report it.")


class DecisionOutputTokensDetailsSerializer(serializers.Serializer):
    reasoning_tokens = serializers.IntegerField(help_text="Always 0: nothing is generated.")


class DecisionsUsageSerializer(serializers.Serializer):
    input_tokens = serializers.IntegerField(help_text="Prompt tokens the backend read (warm-up and every question).")
    input_tokens_details = DecisionInputTokensDetailsSerializer(help_text="Cache hits among the input tokens.")
    output_tokens = serializers.IntegerField(help_text="N + 1: one position read per question, and the warm-up.")
    output_tokens_details = DecisionOutputTokensDetailsSerializer(help_text="Always 0 reasoning tokens.")
    total_tokens = serializers.IntegerField(help_text="input_tokens + output_tokens.")


class DecisionsResponseSerializer(serializers.Serializer):
    answers = serializers.ListField(
        child=PolymorphicProxySerializer(
            component_name="DecisionAnswer",
            resource_type_field_name="type",
            many=False,
            serializers={
                "predicate": DecisionPredicateAnswerSerializer,
                "choice": DecisionChoiceAnswerSerializer,
                "score": DecisionScoreAnswerSerializer,
                "refusal": DecisionRefusalAnswerSerializer,
            },
        ),
        help_text="One per question, in question order.",
    )
    model = ModelField(help_text="The model as requested.")
    usage = DecisionsUsageSerializer(help_text="Tokens the backend read for this request.")


class OpenAIErrorDetailSerializer(serializers.Serializer):
    message = serializers.CharField(
        help_text="What happened, for people; a 400 lists the first 20 problems found, then how many more."
    )
    type = serializers.CharField(
        help_text="`invalid_request_error` (4xx), `permission_error` (403), `rate_limit_error` (429), "
        "`server_error` (5xx)."
    )
    param = serializers.CharField(allow_null=True, help_text="The field at fault, e.g. `questions[2].choices`.")
    code = serializers.CharField(
        allow_null=True,
        help_text="What kind of error, for programs (`invalid_value`, `unknown_parameter`, `model_not_found`, ...).",
    )


class OpenAIErrorSerializer(serializers.Serializer):
    """Every error of `POST /v1/decisions`, in OpenAI's shape."""

    error = OpenAIErrorDetailSerializer(help_text="The error.")


DECISIONS_REQUEST: dict[str, Any] = {
    "model": "jev-latest",
    "input": "Hi, I was charged twice for my March invoice and the refund still hasn't arrived. Fix it today!",
    "questions": [
        {"type": "predicate", "name": "refund", "instructions": "Is the customer asking for money back?"},
        {
            "type": "choice",
            "name": "team",
            "instructions": "Which team should handle this ticket?",
            "choices": [
                {"value": "Billing", "description": "Payments, invoices, refunds"},
                {"value": "Technical", "description": "Bugs, outages"},
                {"value": "Sales", "description": "Pricing, upgrades"},
            ],
        },
        {
            "type": "score",
            "name": "anger",
            "instructions": "How frustrated is the customer?",
            "levels": [{"label": "Calm"}, {"label": "Frustrated"}, {"label": "Very angry"}],
        },
    ],
}
"""The README example, asked through this route: the same questions, so the same answers."""

DECISIONS_CHAT_REQUEST: dict[str, Any] = {
    "model": "jev-latest",
    "input": [
        {"type": "message", "role": "developer", "content": "You are the support assistant of Acme Cloud."},
        {"type": "message", "role": "user", "content": "Is my deploy in eu-west-1 failing because of you?"},
        {"type": "function_call", "call_id": "call_1", "name": "status_lookup", "arguments": '{"region":"eu-west-1"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": '{"status":"degraded"}'},
    ],
    "questions": [
        {"type": "predicate", "name": "outage", "instructions": "Does the tool output show a service problem?"},
        {
            "type": "choice",
            "instructions": [{"type": "input_text", "text": "Is the user technical?"}],
            "choices": [{"value": True}, {"value": False}],
        },
    ],
}

DECISIONS_RESPONSE: dict[str, Any] = {
    "answers": [
        {"type": "predicate", "name": "refund", "probability": 0.88},
        {
            "type": "choice",
            "name": "team",
            "choice": "Billing",
            "confidence": 0.43,
            "probabilities": [
                {"value": "Billing", "probability": 0.8},
                {"value": "Technical", "probability": 0.13},
                {"value": "Sales", "probability": 0.07},
            ],
        },
        {
            "type": "score",
            "name": "anger",
            "score": 1.26,
            "confidence": 0.12,
            "probabilities": [
                {"value": 0, "label": "Calm", "probability": 0.12},
                {"value": 1, "label": "Frustrated", "probability": 0.5},
                {"value": 2, "label": "Very angry", "probability": 0.38},
            ],
        },
    ],
    "model": "jev-latest",
    "usage": {
        "input_tokens": 402,
        "input_tokens_details": {"cached_tokens": 288, "cache_write_tokens": 0},
        "output_tokens": 4,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 406,
    },
}

DECISIONS_EXAMPLES = [
    OpenApiExample("ticket", value=DECISIONS_REQUEST, request_only=True, summary="The README's three questions"),
    OpenApiExample(
        "tool_calls",
        value=DECISIONS_CHAT_REQUEST,
        request_only=True,
        summary="Messages, a function call and its output; boolean choices",
    ),
    OpenApiExample("answers", value=DECISIONS_RESPONSE, response_only=True, status_codes=["200"]),
    *[
        OpenApiExample(
            f"error_{status}",
            value=error_body(ApiError(status, code, message, param=param), shape=OPENAI_SHAPE),
            response_only=True,
            status_codes=[str(status)],
        )
        for status, code, message, param in (
            (
                400,
                "array_below_min_length",
                "questions[1].choices: Between 2 and 255 choices are allowed on this server, got 1",
                "questions[1].choices",
            ),
            (401, "invalid_api_key", "missing API key: send Authorization: Bearer <key>", None),
            (
                404,
                "model_not_found",
                "The model 'gpt-6-luna' does not exist on this server; use jev-latest or Qwen/Qwen3.6-35B-A3B",
                "model",
            ),
            (429, "rate_limited", "rate limit reached for requests; retry in 12s", None),
        )
    ],
]


def _error(description: str) -> OpenApiResponse:
    return OpenApiResponse(OpenAIErrorSerializer, description=description)


DECISIONS_RESPONSES: dict[int, OpenApiResponse] = {
    200: OpenApiResponse(DecisionsResponseSerializer, description="One answer per question, in question order."),
    400: _error(
        "Invalid request, nothing was run: a body that is not JSON, a missing, unknown or invalid field "
        "(`param` names the first; the message lists the first 20, then how many more), a token budget, an "
        "image URL where the operator allows no host or not of an allowed host, an image that could not be "
        "fetched, or images where this deployment takes none (`OPENJEV_MAX_IMAGES` 0, as by default) or the "
        "served model cannot see."
    ),
    401: _error("Auth is on and the Bearer key is missing or wrong (`invalid_api_key`)."),
    403: _error(CROSS_SITE_DESCRIPTION),
    404: _error("`model` names no model served here (`model_not_found`)."),
    408: _error("The body did not arrive in time (`request_timeout`)."),
    413: _error("The body, after decompression, is over `max_body_bytes` (`request_too_large`)."),
    415: _error(
        "The `Content-Encoding` is not gzip, zstd or identity, or the body is not declared JSON "
        "(`unsupported_media_type`)."
    ),
    429: _error(
        "The caller is over a per-key limit (`rate_limit_exceeded`): requests or input tokens per minute, or "
        "evaluations in flight; `retry-after`, `retry-after-ms`, `x-ratelimit-*`, `x-should-retry: true` (false "
        "where no retry can help: a paused key, a request larger than the whole per-minute token limit)."
    ),
    500: _error("A bug on our side; `x-should-retry: false`."),
    502: _error("The backend failed this request (`backend_error`); `x-should-retry: false`."),
    503: _error(
        "The backend is unavailable or starting (`backend_unavailable`), or, with auth on, API keys cannot be "
        "checked right now; `retry-after`, `x-should-retry: true`."
    ),
    504: _error("The evaluation took longer than `request_timeout_seconds` (`timeout`); `x-should-retry: false`."),
    529: _error("The server is full (`overloaded`, `max_concurrent_requests`); `retry-after`, `x-should-retry: true`."),
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

"""`POST /v1/systemone`'s request and response, as documentation serializers.

drf-spectacular builds documents from serializers, so these classes exist only to be described: no
request is ever validated by them (that is `api/systemone/parsing.py`, hand-written for FastAPI-style
error locations and byte-exact keys). `tests/docs/test_schema.py` holds the two together.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, PolymorphicProxySerializer, extend_schema
from rest_framework import serializers

from api.openapi.errors import (
    BODY_LATE,
    BODY_TOO_LARGE,
    CROSS_SITE,
    KEY_MISSING,
    ValidationErrorSerializer,
    error_documented,
)
from api.openapi.fields import (
    PROBABILITY_HELP,
    ModelField,
    NullableTextField,
    TextField,
    const_field,
    probability_field,
)
from api.openapi.operations import OPTIONAL_AUTH, RATE_LIMITED_DESCRIPTION, RESPONSE_HEADERS
from api.systemone.examples import REQUEST_EXAMPLES, RESPONSE_EXAMPLES

INSTRUCTIONS_HELP = (
    "What to ask about the state. A string is shown verbatim; an object or array is shown as compact "
    "JSON. Optional: without it the model is asked which option fits the state best."
)


class NoulCriteriaSerializer(serializers.Serializer):
    true = NullableTextField(required=False, help_text='What `true` means. Missing, null or empty → "Yes".')
    false = NullableTextField(required=False, help_text='What `false` means. Missing, null or empty → "No".')


class NoulQuestionSerializer(serializers.Serializer):
    """A yes/no question, answered with P(true)."""

    type = const_field("noul")(help_text="`noul`: a yes/no question.")
    instructions = NullableTextField(required=False, help_text=INSTRUCTIONS_HELP)
    criteria = NoulCriteriaSerializer(
        required=False, allow_null=True, help_text="Optional wording of the two sides; no other keys are allowed."
    )


class ChoiceQuestionSerializer(serializers.Serializer):
    """Pick one of several options, answered with the most likely key and every option's probability."""

    type = const_field("choice")(help_text="`choice`: pick one option.")
    instructions = NullableTextField(required=False, help_text=INSTRUCTIONS_HELP)
    criteria = serializers.DictField(
        child=NullableTextField(),
        help_text="Option key → description, 2 to `max_answers_per_question` entries, in the order to show them. "
        "Keys are returned exactly as sent and stay hidden from the model unless the description is "
        "null, in which case the model reads the key itself.",
    )


class ScoreQuestionSerializer(serializers.Serializer):
    """Place the state on an ordered scale, answered with the expected level index."""

    type = const_field("score")(help_text="`score`: a level on an ordered scale.")
    instructions = NullableTextField(required=False, help_text=INSTRUCTIONS_HELP)
    criteria = serializers.ListField(
        child=TextField(),
        min_length=2,
        help_text="The levels, lowest first (2 to `max_answers_per_question`); each a string, object or array. "
        'The object form `{"0": ...}` is rejected with 422.',
    )


QuestionSerializer = PolymorphicProxySerializer(
    component_name="Question",
    serializers={"noul": NoulQuestionSerializer, "choice": ChoiceQuestionSerializer, "score": ScoreQuestionSerializer},
    resource_type_field_name="type",
)


class SystemOneRequestSerializer(serializers.Serializer):
    """Classify one state with up to `max_questions` typed questions. Other top-level fields are ignored."""

    model = ModelField(
        help_text="`jev-latest`, any `jev-*` alias, the public model id or the served id (see `GET /v1/models`). "
        "Echoed in the response. Unknown → 422."
    )
    state = TextField(
        help_text="What the questions are about. A string is one user message. A non-empty array of objects that all "
        "have `role` (or an object whose only key is `messages` holding one) is a chat transcript, kept as "
        "sent: roles `system`, `user`, `assistant`, `tool`; content is text, or in `user` messages text and "
        '`{"type": "image_url", "image_url": {"url": ...}}` parts (http(s) or base64 `data:` '
        "URLs; where the operator allows image hosts, https URLs of those hosts only, fetched by the service; "
        "audio, video → 422). An object whose `images` is a list of image URLs is those images, then "
        "the rest of the object as JSON. Any other object or array is shown to the model as compact JSON. "
        "Images need a deployment that sees them (`max_images` in `GET /v1/limits`). `null` → 422."
    )
    questions = serializers.DictField(
        child=QuestionSerializer,
        help_text="Caller id → question. Ids are any non-empty strings, returned byte-for-byte in `answers` and never "
        "shown to the model; answers do not depend on the ids, on the other questions or on their order.",
    )
    assets = serializers.DictField(
        child=serializers.DictField(),
        required=False,
        help_text="Images by placeholder, as the official SDK sends them: each placeholder, wherever it appears in a "
        'string of `state`, stands for its image. An asset is `{"type": "image", "format": '
        '"png|jpg|jpeg", "data_base64": ...}`, or, in a `multipart/form-data` body whose first part '
        '`request` holds this JSON, `{"type": "image", "part": "asset-0"}` naming a part of raw '
        "image bytes (every part claimed by exactly one asset). PNG, JPEG and WebP, checked by their "
        "bytes. Placeholders in questions → 422.",
    )


CONFIDENCE_HELP = (
    "How peaked the distribution is, from 0 (uniform) to 1 (certain): by default `1 − H(p)/ln n`; "
    "with `OPENJEV_CONFIDENCE=typesafe`, TypeSafe's formulas. A property of the model's distribution, "
    "**not** a calibrated probability of being correct."
)


class NoulAnswerSerializer(serializers.Serializer):
    type = const_field("noul")(help_text="`noul`.")
    noul = probability_field(help_text="P(true). " + PROBABILITY_HELP)


class ChoiceAnswerSerializer(serializers.Serializer):
    type = const_field("choice")(help_text="`choice`.")
    choice = serializers.CharField(help_text="The most likely option key, exactly as sent (ties go to the first).")
    probabilities = serializers.DictField(
        child=probability_field(), help_text="Option key → probability, in request order. " + PROBABILITY_HELP
    )
    confidence = probability_field(help_text=CONFIDENCE_HELP)


class ScoreAnswerSerializer(serializers.Serializer):
    type = const_field("score")(help_text="`score`.")
    score = serializers.FloatField(min_value=0.0, help_text="Expected level index Σ i·p_i, from 0 to levels − 1.")
    legend = serializers.DictField(
        child=TextField(), help_text='Level index (`"0"`, `"1"`, ...) → the level exactly as sent.'
    )
    probabilities = serializers.DictField(
        child=probability_field(), help_text="Level index → probability. " + PROBABILITY_HELP
    )
    confidence = probability_field(help_text=CONFIDENCE_HELP)


AnswerSerializer = PolymorphicProxySerializer(
    component_name="Answer",
    serializers={"noul": NoulAnswerSerializer, "choice": ChoiceAnswerSerializer, "score": ScoreAnswerSerializer},
    resource_type_field_name="type",
)


class UsageSerializer(serializers.Serializer):
    input_tokens = serializers.IntegerField(
        min_value=0,
        help_text="Prompt tokens the backend read over the warm-up, every question's branches (one per option "
        "order) and any content-free prior it read (cache hits included).",
    )
    output_tokens = serializers.IntegerField(
        min_value=1,
        help_text="Questions + 1, by convention (one token read per question and the warm-up); the backend may "
        "run more generations (one per option order, content-free priors).",
    )


class SystemOneResponseSerializer(serializers.Serializer):
    model = serializers.CharField(help_text="The `model` of the request, as sent.")
    answers = serializers.DictField(
        child=AnswerSerializer, help_text="Question id → answer: the same ids as the request, in the same order."
    )
    usage = UsageSerializer(help_text="What the evaluation cost the backend.")


SYSTEMONE_RESPONSES: dict[int, OpenApiResponse] = {
    200: OpenApiResponse(
        SystemOneResponseSerializer, description="One answer per question, keyed by the question ids of the request."
    ),
    400: error_documented(
        "The body is a corrupt gzip/zstd stream (`invalid_request`), or a Decisions request (`input`) sent here "
        "(`wrong_route`: its message names /v1/decisions)."
    ),
    401: KEY_MISSING,
    403: CROSS_SITE,
    408: BODY_LATE,
    413: BODY_TOO_LARGE,
    415: error_documented(
        "The `Content-Encoding` is not gzip, zstd or identity, or the body is not declared JSON "
        "(or multipart) (`unsupported_media_type`)."
    ),
    422: OpenApiResponse(
        ValidationErrorSerializer,
        description="Validation failed: a body that is not JSON or not UTF-8 (`json_invalid`, "
        'located at `["body", <position>]`) or not the multipart form '
        "(`multipart_invalid`); shape, counts, unknown model, chat roles or content, a "
        "transcript the model's chat template cannot render, text that is not valid "
        "Unicode (a lone surrogate), a number beyond a double, nesting over 128 levels, "
        "a token budget, or images (`images_not_supported` when this deployment takes none, "
        "`OPENJEV_MAX_IMAGES` 0 as by default, or the served model cannot see; `too_many_images`, "
        "`image_too_large`, `image_format`, `image_url`, `image_url_not_allowed`, `image_fetch_failed`, ...). "
        "Nothing was run.",
    ),
    429: error_documented(RATE_LIMITED_DESCRIPTION),
    500: error_documented("A bug on our side (`internal_error`)."),
    502: error_documented("The backend answered with an error or malformed log-probabilities (`backend_error`)."),
    503: error_documented(
        "The backend is unreachable or still starting (`backend_unavailable`), or, with auth on, API keys cannot "
        "be checked right now (`service_unavailable`); see `Retry-After`."
    ),
    504: error_documented("The evaluation took longer than `request_timeout_seconds` (`timeout`)."),
    529: error_documented(
        "More than `max_concurrent_requests` evaluations are running in this process (`overloaded`); "
        "retry after `Retry-After`."
    ),
}

SYSTEMONE_DESCRIPTION = """\
Answers every question about `state` from the model's log-probabilities for single-token answer labels at the first
output position: no text is generated. The state is rendered once with the model's chat template and cached by the
backend (the warm-up); each question then adds only its own short suffix, in one branch per option order it is
asked in (the served model's tuning: one for most shapes), all sharing that prefix; a model tuned to debias also
reads each new question once without the state (its content-free prior), cached after.

Bodies may be sent with `Content-Encoding: zstd` or `gzip` (the official SDK compresses bodies of 1 KiB and more).
Everything the caller can fix is a 4xx, checked before any model work; 5xx is kept for the backend and for bugs, so
a retry is never spent on a mistake of the caller's. 503 and 529 are worth retrying after `Retry-After`; a 500, 502 or
504 would most likely fail again.
"""

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

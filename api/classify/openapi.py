"""`POST /v1/classify`'s request, response and errors (SGLang's and vLLM's shapes), and its operation."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers

from api.classify.errors import CLASSIFY_SHAPE
from api.openapi.errors import CROSS_SITE_DESCRIPTION, SHARED_ERRORS, ClassifyErrorSerializer, error_example
from api.openapi.fields import (
    PROBABILITY_HELP,
    ClassifyInputField,
    NullField,
    ZeroField,
    const_field,
    probability_field,
)
from api.openapi.operations import (
    AUTH_HEADER,
    OPTIONAL_AUTH,
    RATE_LIMIT_HEADERS,
    RATE_LIMITED_DESCRIPTION,
    RETRY_AFTER_HEADER,
)


class ClassifyRequestSerializer(serializers.Serializer):
    """Classify one text or a list of texts with a classifier saved in the admin. Other fields (`user`, `rid`,
    `priority`, ...) are ignored."""

    model = serializers.CharField(
        help_text="A classifier's name, as defined in the admin (`GET /v1/models` lists "
        "them in `data`, after the model names). Unknown → 404."
    )
    input = ClassifyInputField(
        help_text="The text to classify, or a list of 1 to `max_classify_inputs` texts (64 by "
        "default), classified concurrently. Token ids are not supported."
    )


class ClassifyResultSerializer(serializers.Serializer):
    index = serializers.IntegerField(min_value=0, help_text="Position of the text in `input` (0 for a single text).")
    label = serializers.CharField(  # type: ignore[assignment]  # a field named like Field.label, as `data` above
        help_text="The most likely label (ties go to the first). A noul classifier answers `true` or `false`; a "
        "score classifier the name of a level."
    )
    probs = serializers.ListField(
        child=probability_field(),
        min_length=2,
        help_text="One probability per label, in the classifier's label order (a noul "
        "classifier: [P(true), P(false)]; a score: levels lowest first). " + PROBABILITY_HELP,
    )
    num_classes = serializers.IntegerField(min_value=2, help_text="The number of labels (the length of `probs`).")


class ClassifyUsageSerializer(serializers.Serializer):
    prompt_tokens = serializers.IntegerField(
        min_value=0,
        help_text="Prompt tokens the backend read over the warm-up and branch of every input (cache hits included).",
    )
    total_tokens = serializers.IntegerField(min_value=0, help_text="The same as `prompt_tokens`.")
    completion_tokens = ZeroField(help_text="Always 0: nothing is generated for the caller.")
    prompt_tokens_details = NullField(help_text="Always null.")


class ClassifyResponseSerializer(serializers.Serializer):
    """The SGLang / vLLM classification response."""

    id = serializers.CharField(
        help_text="`classify-<hex>`; also the `x-typesafe-request-id` header and the stored evaluation's request id."
    )
    object = const_field("list")(help_text="Always `list`.")
    created = serializers.IntegerField(min_value=0, help_text="Unix time (seconds) when the request arrived.")
    model = serializers.CharField(help_text="The classifier's name, as requested.")
    # A field named like Serializer.data: DRF's metaclass moves it into `fields`, so the property is intact.
    data = ClassifyResultSerializer(many=True, help_text="One result per input text, in input order.")  # type: ignore[assignment]
    usage = ClassifyUsageSerializer(help_text="What the request cost the backend.")


CLASSIFY_REQUEST: dict[str, Any] = {
    "model": "sentiment",
    "input": ["Loved the new café—coffee was great.", "The delivery was late and the box was crushed."],
}

CLASSIFY_RESPONSE: dict[str, Any] = {
    "id": "classify-9bf17f2847b046c7b2d5495f4b4f9682",
    "object": "list",
    "created": 1745383213,
    "model": "sentiment",
    "data": [
        {"index": 0, "label": "positive", "probs": [0.94, 0.02, 0.04], "num_classes": 3},
        {"index": 1, "label": "negative", "probs": [0.01, 0.96, 0.03], "num_classes": 3},
    ],
    "usage": {"prompt_tokens": 412, "total_tokens": 412, "completion_tokens": 0, "prompt_tokens_details": None},
}


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
        400: _classify_failure(
            "The body is not JSON or not valid: `model` or `input` missing or of the wrong type, "
            "too many texts, or a text over the token budgets (`invalid_request`)."
        ),
        401: _classify_failure("Auth is on and the Bearer key is missing or wrong (`authentication_error`)."),
        403: _classify_failure(CROSS_SITE_DESCRIPTION),
        404: _classify_failure("No classifier has this name (`not_found`)."),
        408: _classify_failure("The body did not arrive in time (`request_timeout`); the connection is closed."),
        413: _classify_failure("The body, after decompression, is over `max_body_bytes` (`request_too_large`)."),
        415: _classify_failure(
            "The `Content-Encoding` is not gzip, zstd or identity, or the body is not declared "
            "JSON (`unsupported_media_type`)."
        ),
        429: _classify_failure(RATE_LIMITED_DESCRIPTION),
        500: _classify_failure("A bug on our side (`internal_error`)."),
        502: _classify_failure("The backend answered with an error or malformed log-probabilities (`backend_error`)."),
        503: _classify_failure("The backend (or the classifier table) is unavailable; see `Retry-After`."),
        504: _classify_failure("The request took longer than `request_timeout_seconds` (`timeout`)."),
        529: _classify_failure(
            "More than `max_concurrent_requests` requests are running in this process "
            "(`overloaded`); retry after `Retry-After`."
        ),
    },
    examples=[
        OpenApiExample(
            "SentimentClassifier",
            value=CLASSIFY_REQUEST,
            request_only=True,
            summary="Two reviews, one sentiment classifier",
            description="Needs a classifier `sentiment` with labels positive, negative, neutral.",
        ),
        OpenApiExample(
            "SentimentAnswer",
            value=CLASSIFY_RESPONSE,
            response_only=True,
            status_codes=["200"],
            summary="One result per review",
        ),
        error_example(
            400,
            "invalid_request",
            "`input` is required: a text, or a list of texts",
            shape=CLASSIFY_SHAPE,
            prefix="classify_",
        ),
        error_example(
            404,
            "not_found",
            "no classifier named 'sentimnet'; GET /v1/models lists them after the model names",
            shape=CLASSIFY_SHAPE,
            prefix="classify_",
        ),
        *(
            error_example(status, error_type, message, shape=CLASSIFY_SHAPE, prefix="classify_")
            for status, (error_type, message) in SHARED_ERRORS.items()
        ),
    ],
    parameters=[
        OpenApiParameter(
            "x-typesafe-request-id",
            str,
            OpenApiParameter.HEADER,
            required=True,
            response=True,
            description="The request's id (`classify-…`, the body's `id` on a 200), on every response, "
            "errors included; also stored with it, and named in a 5xx's message.",
        ),
        OpenApiParameter(
            "x-openjev-model",
            str,
            OpenApiParameter.HEADER,
            required=True,
            response=[200],
            description="The language model the backend actually served.",
        ),
        RETRY_AFTER_HEADER,
        *RATE_LIMIT_HEADERS,
        AUTH_HEADER,
    ],
    auth=OPTIONAL_AUTH,
)

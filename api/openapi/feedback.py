"""`POST /v1/feedback`, documented: the true label of one stored answer."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers

from api.openapi.errors import (
    BODY_CORRUPT,
    BODY_LATE,
    BODY_TOO_LARGE,
    CROSS_SITE,
    KEY_MISSING,
    ValidationErrorSerializer,
    error_documented,
)
from api.openapi.operations import OPTIONAL_AUTH, REQUEST_ID_HEADER, RETRY_AFTER_HEADER


class LabelField(serializers.JSONField):
    """A string, a boolean or an integer: the documentation says which, per question type."""


@extend_schema_field(
    {"oneOf": [{"type": "string", "minLength": 1}, {"type": "integer", "minimum": 0, "maximum": 32767}]}
)
class QuestionIdField(serializers.JSONField):
    """A question's id, or a question's position in its request (`api/feedback.py`)."""


class FeedbackRequestSerializer(serializers.Serializer):
    request_id = serializers.CharField(help_text="The evaluation's `x-typesafe-request-id`.")
    question_id = QuestionIdField(
        help_text="The question's id in that request, or, for a Decisions request, its name or its 0-based position."
    )
    # A field named like Field.label: DRF's metaclass moves it into `fields`, so the attribute is intact.
    label = LabelField(
        help_text="The true answer: a choice's option key, `true`/`false` for noul, the level index "
        "(0 = first level) for score."
    )  # type: ignore[assignment]


class FeedbackResponseSerializer(serializers.Serializer):
    request_id = serializers.CharField(help_text="As sent.")
    question_id = serializers.CharField(help_text="The stored question id of the labelled answer.")
    label = serializers.CharField(  # type: ignore[assignment]
        help_text="The option key stored (noul `true`/`false`, score the level index)."
    )
    labelled_at = serializers.DateTimeField(help_text="When the label was stored (replaced by a later one).")


feedback_schema = extend_schema(
    operation_id="feedback",
    summary="Label a stored answer with the truth",
    description="Records the true answer to one question of a stored evaluation, for accuracy figures and "
    "calibration fits (`manage.py calibrate`). Idempotent per (request, question): sending it again "
    "replaces the label. With auth on, only evaluations made with the caller's key can be labelled. "
    "Evaluations are stored shortly after their response: a 404 right after it may be retried.",
    tags=["Labels"],
    request=FeedbackRequestSerializer,
    responses={
        200: OpenApiResponse(FeedbackResponseSerializer, description="The label as stored."),
        400: BODY_CORRUPT,
        401: KEY_MISSING,
        403: CROSS_SITE,
        404: error_documented("No stored answer to that question of that request (`not_found`)."),
        408: BODY_LATE,
        413: BODY_TOO_LARGE,
        415: error_documented(
            "The body is not declared JSON (`unsupported_media_type`): send it with `Content-Type: application/json`."
        ),
        422: OpenApiResponse(
            ValidationErrorSerializer,
            description="A missing field, or a label that is not one of the question's options (`label_invalid`).",
        ),
        500: error_documented("A bug on our side (`internal_error`)."),
        503: error_documented("The database cannot be used right now (`service_unavailable`); see `Retry-After`."),
    },
    examples=[
        OpenApiExample(
            "A choice label",
            request_only=True,
            value={"request_id": "req_0123456789abcdef0123456789abcdef", "question_id": "mood", "label": "positive"},
        )
    ],
    parameters=[REQUEST_ID_HEADER, RETRY_AFTER_HEADER],
    auth=OPTIONAL_AUTH,
)

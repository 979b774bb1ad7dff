"""What `POST /v1/decisions` (OpenAI's Decisions API) answers, as documented: the answers with their usage, and
the error in OpenAI's shape, which every route of OpenAI's SDK answers (the Files and Batches routes document it
too: `api.batches.openapi`).
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, PolymorphicProxySerializer
from rest_framework import serializers

from api.decisions.openapi_request import ValueField
from api.openapi.fields import ModelField, const_field, probability_field

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


def error_response(description: str) -> OpenApiResponse:
    """An error a route of OpenAI's SDK answers, with what it means there."""
    return OpenApiResponse(OpenAIErrorSerializer, description=description)

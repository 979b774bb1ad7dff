"""The body of `POST /v1/decisions` (OpenAI's Decisions API) as documented: its input, its questions and its
options.

The shape declared once: the parser (`api/decisions/parsing.py`, `questions.py`) takes each object's keys and the
question types from these serializers (`serializer_keys`) and refuses any other; it validates the values itself
(linear, every problem located, OpenAI's wording), and `tests/docs/test_schema.py` holds what it reads of them to
the document.
"""

from __future__ import annotations

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from api.openapi.fields import ModelField, const_field

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

"""`GET /v1/models`, `/v1/limits`, `/health` and `/health/live`, as documentation serializers."""

from __future__ import annotations

from rest_framework import serializers

from api.openapi.fields import HealthStatusField, const_field


class ModelDescriptionSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="A value for `model`.")
    description = serializers.CharField(help_text="What the name stands for.")
    release_date = serializers.CharField(help_text="`YYYY-MM-DD`, or `unknown`.")


class OpenAIModelSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="A value for `model`.")
    object = const_field("model")(help_text="Always `model`.")
    created = serializers.IntegerField(
        help_text="Unix seconds, as OpenAI's `Model` requires: a fixed date (2026-01-01), since nothing here knows "
        "when a model was made; a sort key, not a release date (`release_date` in `models`)."
    )
    owned_by = serializers.CharField(help_text="Always `openjev`.")


class ModelsResponseSerializer(serializers.Serializer):
    """TypeSafe's `models` list and OpenAI's `data` list, in one body, so both kinds of client read it."""

    models = ModelDescriptionSerializer(many=True, help_text="The alias first, then the public model id.")
    object = const_field("list")(help_text="Always `list`.")
    # A field named like Serializer.data: DRF's metaclass moves it into `fields`, so the property is intact.
    data = OpenAIModelSerializer(
        many=True,
        help_text="The same models, OpenAI-style, then every classifier "  # type: ignore[assignment]
        "defined in the admin (names for `POST /v1/classify`).",
    )


class DecisionsLimitsSerializer(serializers.Serializer):
    max_questions = serializers.IntegerField(min_value=1, help_text="Questions per request (OpenAI's API: 400).")
    max_choices = serializers.IntegerField(min_value=2, help_text="Choices of one choice question.")
    max_levels = serializers.IntegerField(min_value=2, help_text="Levels of one score question (at most 10).")
    max_images = serializers.IntegerField(min_value=0, help_text="Images in the input; 0: refused.")


class LimitsSerializer(serializers.Serializer):
    max_questions = serializers.IntegerField(min_value=1, help_text="Questions per request.")
    max_answers_per_question = serializers.IntegerField(min_value=2, help_text="Choice options or score levels.")
    max_body_bytes = serializers.IntegerField(min_value=1, help_text="Request body after decompression.")
    max_images = serializers.IntegerField(
        min_value=0, help_text="Images one request may carry in its state; 0: this deployment refuses images."
    )
    max_image_bytes = serializers.IntegerField(min_value=1, help_text="Bytes of one image file, decoded.")
    max_input_tokens = serializers.IntegerField(
        min_value=1,
        help_text="Tokens of one branch's prompt (the state and one question): `OPENJEV_MAX_INPUT_TOKENS`, or the "
        "backend's context length where that is smaller, once the backend is known.",
    )
    max_total_input_tokens = serializers.IntegerField(
        min_value=1, help_text="Tokens over the warm-up and every branch of every question."
    )
    max_concurrent_requests = serializers.IntegerField(
        min_value=1, help_text="Evaluations at once in one process; more get 529."
    )
    max_concurrent_branches = serializers.IntegerField(min_value=1, help_text="Backend calls at once in one process.")
    request_timeout_seconds = serializers.FloatField(min_value=0.0, help_text="Longest evaluation before 504.")
    decisions = DecisionsLimitsSerializer(
        help_text="What one `POST /v1/decisions` may ask; over a limit is a 400 naming it."
    )


class WorkersSerializer(serializers.Serializer):
    up = serializers.IntegerField(
        min_value=0, help_text="API processes running; a replacement counts from its start (it answers once ready)."
    )
    configured = serializers.IntegerField(min_value=1, help_text="`serve --workers N`: N (1 for a single process).")
    replaced = serializers.IntegerField(
        min_value=0, help_text="Processes started in place of dead ones since serve started."
    )


class CachesSerializer(serializers.Serializer):
    api_keys = serializers.FloatField(allow_null=True, help_text="The API keys this process knows.")
    calibrations = serializers.FloatField(allow_null=True, help_text="The active calibrations.")
    classifiers = serializers.FloatField(allow_null=True, help_text="The classifiers.")
    batches = serializers.FloatField(allow_null=True, help_text="The batch figures of `GET /metrics`.")


class HealthSerializer(serializers.Serializer):
    status = HealthStatusField(help_text="`ok` when the backend answers its health check, else `unavailable`.")
    backend = serializers.CharField(help_text="`local` (embedded llama.cpp) or `sglang`.")
    model = serializers.CharField(
        required=False,
        help_text="The served model, once the backend answers; with auth on, only to a request with a valid key.",
    )
    startup_seconds = serializers.FloatField(
        allow_null=True, help_text="How long the engine took to start; null while it is starting."
    )
    message = serializers.CharField(required=False, help_text="Why the service is unavailable.")
    worker_pid = serializers.IntegerField(
        required=False,
        help_text="The API process that answered (one of `serve --workers N`), once ready; with auth on, only to a "
        "request with a valid key.",
    )
    workers = WorkersSerializer(
        required=False,
        help_text="`serve`'s API processes, once ready: a dead one is replaced while the others answer. With auth "
        "on, only to a request with a valid key.",
    )
    caches = CachesSerializer(
        required=False,
        help_text="Seconds since each database-backed cache this process serves requests from was read (null: it "
        "holds nothing yet); they grow while the database cannot be read, and the last values serve meanwhile. "
        "With auth on, only to a request with a valid key.",
    )


class LiveSerializer(serializers.Serializer):
    status = const_field("ok")(help_text="Always `ok`.")

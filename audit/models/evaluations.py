"""One row per evaluation, one row per answer: what the admin filters, searches and aggregates on (status,
model, backend, key, time, question type, confidence) as columns; everything else as JSON."""

from __future__ import annotations

from django.db import models

from audit.apis import api_choices
from audit.models.calibrations import Calibration
from audit.models.classifiers import Classifier, DatasetRun
from audit.models.fields import (
    QUESTION_TYPE_CHOICES,
    STATUS_CHOICES,
    STORE_LEVEL_CHOICES,
    JSONTextField,
)
from audit.models.keys import ApiKey


class Evaluation(models.Model):
    """One call of `POST /v1/systemone`, `POST /v1/decisions` or `POST /v1/classify` (then with its classifier)
    that reached the evaluation service, answered or failed."""

    request_id = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(db_index=True)
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.DB_SET_NULL, related_name="evaluations")
    api_key_label = models.CharField(
        "API key",
        max_length=32,
        blank=True,
        db_index=True,
        help_text="oj_<prefix> for an issued key, 'env' for OPENJEV_API_KEY, empty when auth is off.",
    )
    requested_model = models.CharField(max_length=200, blank=True)
    served_model = models.CharField(max_length=200, blank=True, db_index=True)
    backend = models.CharField(max_length=32, blank=True, db_index=True)
    status_code = models.PositiveSmallIntegerField("status", choices=STATUS_CHOICES, db_index=True)
    error_type = models.CharField(max_length=64, blank=True)
    error_message = models.TextField(blank=True)
    error_detail = models.JSONField(null=True, blank=True, help_text="Validation problems of a 422.")
    question_count = models.PositiveSmallIntegerField(default=0)
    question_types = models.CharField(max_length=32, blank=True, help_text="Sorted, comma-separated.")
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    prefix_tokens = models.PositiveIntegerField(null=True, blank=True)
    cached_tokens = models.PositiveIntegerField(null=True, blank=True)
    prepare_ms = models.FloatField(null=True, blank=True)
    prefill_ms = models.FloatField(null=True, blank=True)
    branches_ms = models.FloatField(null=True, blank=True)
    total_ms = models.FloatField(
        "latency (ms)", null=True, blank=True, help_text="Time spent in the evaluation service, validation to answer."
    )
    classifier = models.ForeignKey(
        Classifier, null=True, blank=True, on_delete=models.DB_SET_NULL, related_name="evaluations"
    )
    classifier_name = models.CharField(
        "classifier",
        max_length=100,
        blank=True,
        db_index=True,
        help_text="The classifier a POST /v1/classify asked for (kept after it is "
        "renamed or deleted); empty for POST /v1/systemone.",
    )
    store_level = models.CharField(max_length=16, choices=STORE_LEVEL_CHOICES)
    api = models.CharField(
        "API",
        max_length=16,
        choices=api_choices,
        default="systemone",
        help_text="The wire format the call came through.",
    )
    safety_identifier = models.CharField(
        max_length=64,
        blank=True,
        help_text="The caller's own id of its end user (POST /v1/decisions `safety_identifier`), as sent; "
        "never an authenticated identity.",
    )
    prompt_cache_key = models.CharField(
        max_length=256,
        blank=True,
        help_text="POST /v1/decisions `prompt_cache_key`, as sent (the backend's prefix cache needs no hint).",
    )
    image_count = models.PositiveSmallIntegerField("images", default=0)
    images = models.JSONField(
        null=True,
        blank=True,
        help_text="Per image of the state, in prompt order: source (data or url), format, size in bytes and "
        "SHA-256 (unknown for a URL the backend fetched). Kept at every storage level; the bytes never are.",
    )
    state = JSONTextField(null=True, blank=True)
    questions = JSONTextField(null=True, blank=True)
    dataset_run = models.ForeignKey(
        DatasetRun, null=True, blank=True, on_delete=models.DB_SET_NULL, related_name="evaluations"
    )

    class Meta:
        ordering = ("-created_at", "-id")
        indexes = (
            models.Index(fields=["status_code", "created_at"], name="evaluation_status_time"),
            models.Index(fields=["api_key_label", "created_at"], name="evaluation_key_time"),
        )

    def __str__(self) -> str:
        return self.request_id


class EvaluationAnswer(models.Model):
    """One answered question, so answers can be queried across evaluations (type, id, confidence)."""

    # Not indexed on its own: the (evaluation, position) constraint's index starts with it.
    evaluation = models.ForeignKey(Evaluation, on_delete=models.DB_CASCADE, related_name="answers", db_index=False)
    position = models.PositiveSmallIntegerField()
    question_id = models.CharField(max_length=500, help_text="Caller's id (stored up to 500 characters).")
    type = models.CharField(max_length=8, choices=QUESTION_TYPE_CHOICES)
    noul = models.FloatField(null=True, blank=True, help_text="P(true) of a noul answer.")
    choice = models.CharField(max_length=255, null=True, blank=True, help_text="The chosen option key.")
    score = models.FloatField(null=True, blank=True, help_text="The expected level of a score answer.")
    confidence = models.FloatField(null=True, blank=True)
    probabilities = models.JSONField(help_text="Option key (score: level index) → probability, as served.")
    option_keys = models.JSONField(help_text="Option keys in the order the model saw them.")
    option_texts = models.JSONField(
        null=True,
        blank=True,
        help_text="Each option as the model read it, in the order of the option keys (level `full` keeps it): what "
        "the audit shows, whichever wire format asked.",
    )
    instructions = models.TextField(
        blank=True, default="", help_text="The question's instructions as the model read them (level `full`)."
    )
    raw_probabilities = models.JSONField(
        null=True,
        blank=True,
        help_text="Option key → probability as the model gave it: label log-probs renormalised, before "
        "debiasing, temperature and calibration.",
    )
    label_mass = models.FloatField(
        null=True,
        blank=True,
        help_text="Summed probability of the option labels before renormalising: near 1 when the model "
        "answered with a label; low values mean the answer is a ratio of leftovers.",
    )
    refused = models.BooleanField(
        default=False,
        help_text="Answered as a refusal (POST /v1/decisions): the label mass was under "
        "OPENJEV_REFUSAL_LABEL_MASS. The numbers above are kept as the model gave them.",
    )
    question_key = models.CharField(
        max_length=32, blank=True, help_text="The question's identity for calibration (type, instructions, options)."
    )
    uncalibrated_probabilities = models.JSONField(
        null=True, blank=True, help_text="Option key → probability before calibration; empty when none applied."
    )
    calibration = models.ForeignKey(
        Calibration, null=True, blank=True, on_delete=models.DB_SET_NULL, related_name="answers", db_index=False
    )
    label = models.CharField(
        max_length=255,
        null=True,
        blank=True,
        help_text="The true option key (noul: true/false; score: the level index), from "
        "POST /v1/feedback, a dataset run or the admin.",
    )
    labelled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("evaluation", "position")
        constraints = (models.UniqueConstraint(fields=["evaluation", "position"], name="answer_position_unique"),)
        # Every index is paid for on each of up to 64 inserts per evaluation, so there is one per query the
        # service or its documented queries make, and the two that only find a few rows (labelled answers
        # for calibration, calibrated answers when a calibration is deleted) are partial.
        indexes = (
            models.Index(fields=["question_id", "type"], name="answer_question_type"),
            models.Index(fields=["question_key"], condition=models.Q(label__isnull=False), name="answer_labelled_key"),
            models.Index(
                fields=["calibration"], condition=models.Q(calibration__isnull=False), name="answer_calibrated"
            ),
        )

    def __str__(self) -> str:
        return f"{self.question_id} ({self.type})"

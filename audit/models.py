"""What the service remembers: issued API keys and one row per evaluation, with one row per answer.

Columns hold what the admin filters, searches and aggregates on (status, model, backend, key, time,
question type, confidence); everything else is JSON. State and questions are kept as JSON *text*
rather than `JSONField`, because PostgreSQL's jsonb reorders object keys, and the order of a
choice's options (and of a transcript's keys) is part of what the model saw.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

STATUS_CHOICES = [
    (200, "200 OK"),
    (400, "400 invalid request (classify, decisions)"),
    (404, "404 unknown classifier or model (classify, decisions)"),
    (422, "422 invalid request"),
    (499, "499 client closed request"),
    (500, "500 internal error"),
    (502, "502 backend error"),
    (503, "503 backend unavailable"),
    (504, "504 timeout"),
    (529, "529 overloaded"),
]
API_CHOICES = [
    ("systemone", "System One (POST /v1/systemone and its stream)"),
    ("decisions", "Decisions (POST /v1/decisions)"),
    ("classify", "Classify (POST /v1/classify)"),
]
"""The wire format a call came through: every one runs the same evaluation."""
QUESTION_TYPE_CHOICES = [("noul", "noul"), ("choice", "choice"), ("score", "score")]
STORE_LEVEL_CHOICES = [("full", "full"), ("metadata", "metadata")]


class JSONTextField(models.TextField):
    """Any JSON value, stored as compact JSON text so key order and duplicates survive every database."""

    description = "JSON kept as text (key order preserved)"
    # What the model attribute holds, for django-stubs: any JSON value, not the text it is stored as.
    _pyi_private_set_type: Any
    _pyi_private_get_type: Any

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> Any:
        return None if value is None else json.loads(value)

    def to_python(self, value: Any) -> Any:
        return value

    def get_prep_value(self, value: Any) -> str | None:
        if value is None:
            return None
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    def value_to_string(self, obj: models.Model) -> str:
        return self.get_prep_value(self.value_from_object(obj)) or ""


class ApiKey(models.Model):
    """An issued Bearer key. Only a SHA-256 of the secret is kept; the prefix identifies it in lists and logs."""

    name = models.CharField(max_length=100, help_text="What the key is for, e.g. 'support-bot production'.")
    owner = models.CharField(max_length=200, blank=True, help_text="Who to ask about it (person or team).")
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    secret_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Leave empty for a key that never expires.")
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    requests_per_minute = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Evaluating requests per minute; blank: OPENJEV_KEY_REQUESTS_PER_MINUTE (unset: unlimited).",
    )
    tokens_per_minute = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Input tokens per minute; blank: OPENJEV_KEY_TOKENS_PER_MINUTE (unset: unlimited).",
    )
    concurrency = models.PositiveIntegerField(
        "concurrent evaluations",
        null=True,
        blank=True,
        help_text="Evaluations in flight at once; blank: OPENJEV_KEY_CONCURRENCY (unset: unlimited).",
    )

    class Meta:
        verbose_name = "API key"
        verbose_name_plural = "API keys"
        ordering = ("-created_at",)

    def __str__(self) -> str:
        return f"{self.name} ({self.label})"

    @property
    def label(self) -> str:
        """What evaluations record as the key used: the public part, never the secret."""
        return f"oj_{self.prefix}"

    def is_active(self, *, now: Any = None) -> bool:
        now = now or timezone.now()
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)


CLASSIFIER_TYPE_CHOICES = [
    ("choice", "choice: one of the labels"),
    ("noul", "noul: true / false"),
    ("score", "score: ordered levels, lowest first"),
]
CLASSIFIER_NAME_VALIDATOR = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]*\Z",
    "Letters, digits and . _ : / @ + - only, starting with a letter or digit (it is sent as `model`).",
)


class Classifier(models.Model):
    """A saved question served through `POST /v1/classify` under its name, like a fine-tuned classifier.

    In effect a saved `choice` (or `noul`, or `score`) question: the labels are its options in order.
    The API reads classifiers through a short in-process cache (`api.classify`); saving or
    deleting one (or one of its labels) drops that cache (`audit.signals`), so this process sees
    the change at once and others within seconds.
    """

    name = models.CharField(
        max_length=100,
        unique=True,
        validators=[CLASSIFIER_NAME_VALIDATOR],
        help_text="What clients send as `model` to POST /v1/classify, e.g. 'sentiment'.",
    )
    type = models.CharField(
        max_length=8,
        choices=CLASSIFIER_TYPE_CHOICES,
        default="choice",
        help_text="choice: the labels below; noul: labels true and false (rows optional, "
        "for their wording); score: the labels are levels, lowest first.",
    )
    description = models.TextField(
        blank=True, help_text="For people: what it is for, who uses it. Never shown to the model."
    )
    instructions = models.TextField(
        blank=True,
        help_text="The question the model answers about each input, e.g. "
        "'What is the sentiment of this review?'. Blank: a "
        "generic question.",
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name


class ClassifierLabel(models.Model):
    """One label of a classifier, in `position` order: `probs` follows that order."""

    classifier = models.ForeignKey(Classifier, on_delete=models.CASCADE, related_name="labels")
    position = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        help_text="Order (a score's levels lowest first); blank: after the others. Renumbered 1, 2, … on save.",
    )
    name = models.CharField(max_length=255, help_text="Returned as `label`.")
    description = models.TextField(blank=True, help_text="What the model reads for this label; blank: the name itself.")

    class Meta:
        verbose_name = "label"
        verbose_name_plural = "labels"
        # Rows saved outside the admin may have no position: they come last on every database.
        ordering = ("classifier", models.F("position").asc(nulls_last=True), "id")

    def __str__(self) -> str:
        return self.name


class DatasetRun(models.Model):
    """One `manage.py evaluate_dataset` run: its labelled evaluations link here; metrics are kept when it ends."""

    name = models.CharField(max_length=100, unique=True, help_text="Named on the command line; rerunning it resumes.")
    source = models.CharField(max_length=500, blank=True, help_text="The file the items came from.")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    finished_at = models.DateTimeField(null=True, blank=True)
    item_count = models.PositiveIntegerField(default=0)
    metrics = models.JSONField(
        null=True,
        blank=True,
        help_text="Accuracy, log loss, Brier, ECE, label mass and per question the "
        "confusion matrix and reliability bins (calibration.labelled).",
    )

    class Meta:
        ordering = ("-created_at",)

    def __str__(self) -> str:
        return self.name


class Calibration(models.Model):
    """A fitted calibration of one question (by its key) or one saved classifier, with its fit report.

    Serving applies the active one of a key when `OPENJEV_CALIBRATION` is on; at most one per key is active.
    """

    key = models.CharField(
        max_length=200,
        db_index=True,
        help_text="A question key (hash of type, instructions and options) or 'classifier:NAME'.",
    )
    subject = models.CharField(max_length=300, blank=True, help_text="What it calibrates, in words.")
    question_type = models.CharField(max_length=8, choices=QUESTION_TYPE_CHOICES)
    option_keys = models.JSONField(help_text="The options in order: the biases follow it.")
    method = models.CharField(max_length=16, choices=[("temperature", "temperature"), ("vector", "vector scaling")])
    temperature = models.FloatField()
    biases = models.JSONField(null=True, blank=True, help_text="Per option (vector scaling), else empty.")
    report = models.JSONField(help_text="n, split sizes, held-out metrics and reliability bins before and after.")
    active = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    label_keys = models.JSONField(
        "labels by API key",
        default=dict,
        blank=True,
        help_text="Which API keys' labels it was fitted on, and how many each ('' : no key).",
    )
    applies_to = models.JSONField(
        null=True,
        blank=True,
        help_text='The API keys whose answers it changes, e.g. ["oj_ab12cd34"] ("" for calls without a key); '
        "empty: every caller's. Labels from one tenant should calibrate that tenant alone.",
    )

    class Meta:
        ordering = ("-created_at",)
        constraints = (
            models.UniqueConstraint(
                fields=["key"], condition=models.Q(active=True), name="calibration_one_active_per_key"
            ),
        )

    def __str__(self) -> str:
        return f"{self.subject or self.key} ({self.method}, T={self.temperature:.3g})"


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
        choices=API_CHOICES,
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

    @property
    def question_sent(self) -> dict[str, Any]:
        """The answer's question as the request sent it, {} when it was not stored (level `full` keeps it):
        System One's questions by id, a Decisions request's (a list) by position."""
        questions = self.evaluation.questions
        if isinstance(questions, list):
            found = questions[self.position] if self.position < len(questions) else None
        else:
            found = questions.get(self.question_id) if isinstance(questions, dict) else None
        return found if isinstance(found, dict) else {}


class KeyUsage(models.Model):
    """What one API key (or, without keys, everyone together) used on one day (UTC): answered evaluations,
    their questions, input tokens the backend read and the prefix-cache hits among them. Counted by the
    storage writer from the evaluations it is handed (at every storage level, `off` included)."""

    key_label = models.CharField(
        "API key", max_length=32, help_text="oj_<prefix>, 'env', 'admin', or empty when auth is off."
    )
    day = models.DateField()
    evaluations = models.PositiveIntegerField(default=0)
    questions = models.PositiveBigIntegerField(default=0)
    input_tokens = models.PositiveBigIntegerField(default=0)
    cached_tokens = models.PositiveBigIntegerField(default=0)

    class Meta:
        verbose_name = "key usage (per day)"
        verbose_name_plural = "key usage (per day)"
        ordering = ("-day", "key_label")
        constraints = (models.UniqueConstraint(fields=["key_label", "day"], name="key_usage_per_day"),)

    def __str__(self) -> str:
        return f"{self.key_label or '(no key)'} on {self.day}"

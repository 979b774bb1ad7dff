"""Saved classifiers (`POST /v1/classify`), their labelled examples and the dataset runs that evaluate them."""

from __future__ import annotations

from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

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

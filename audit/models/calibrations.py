"""Calibrations fitted from labelled answers, and the keys they apply to."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from audit.models.fields import QUESTION_TYPE_CHOICES


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

"""Issued API keys and what each used per day."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.utils import timezone


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
        help_text="Requests per minute; 0 pauses the key; blank: OPENJEV_KEY_REQUESTS_PER_MINUTE (unset: unlimited).",
    )
    tokens_per_minute = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Input tokens per minute; 0 pauses the key; blank: OPENJEV_KEY_TOKENS_PER_MINUTE (unset: unlimited).",
    )
    concurrency = models.PositiveIntegerField(
        "concurrent evaluations",
        null=True,
        blank=True,
        help_text="Evaluations in flight at once; 0 pauses the key; blank: OPENJEV_KEY_CONCURRENCY (unset: unlimited).",
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

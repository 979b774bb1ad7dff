"""Batch jobs as stored: an uploaded file's lines, a batch over them, and one item per line.

The file's lines live in the database, not on one machine's disk, so any worker that reaches the database (a
Celery worker on another machine) reads them. Output and error files are not stored twice: they are the items'
answers, written out when downloaded (`batches.output`). One item per (batch, `custom_id`) and per (batch, line):
a line answered once stays answered, however often its chunk is delivered.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class BatchFile(models.Model):
    """A file of OpenAI's Files API: an uploaded input (`purpose` batch) or a batch's output or error file."""

    INPUT, OUTPUT, ERROR = "input", "output", "error"

    id = models.CharField(primary_key=True, max_length=40, editable=False)
    owner = models.CharField("API key", max_length=32, blank=True, help_text="oj_<prefix>, env, or empty.")
    purpose = models.CharField(max_length=16)
    kind = models.CharField(max_length=8, default=INPUT)
    filename = models.CharField(max_length=255)
    bytes = models.BigIntegerField(default=0)
    line_count = models.PositiveIntegerField(default=0)
    longest_line = models.PositiveIntegerField(default=0, help_text="Bytes of the longest line.")
    complete = models.BooleanField(default=False, help_text="False while an upload is still being stored.")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    batch = models.ForeignKey("Batch", null=True, blank=True, on_delete=models.CASCADE, related_name="files")
    """The batch whose output or error file this is; None for an upload."""

    class Meta:
        ordering = ("-created_at",)
        indexes = (models.Index(fields=["owner", "created_at"], name="batchfile_owner_created"),)

    def __str__(self) -> str:
        return f"{self.id} ({self.filename})"


class FileLine(models.Model):
    """One line of an uploaded file, as sent (UTF-8 text without its line break)."""

    file = models.ForeignKey(BatchFile, on_delete=models.CASCADE, related_name="lines")
    number = models.PositiveIntegerField()
    text = models.TextField()

    class Meta:
        constraints = (models.UniqueConstraint(fields=["file", "number"], name="fileline_per_number"),)


class Batch(models.Model):
    """One batch of OpenAI's Batches API, with its counts kept up to date as its items are answered."""

    STATUSES = (
        "validating",
        "failed",
        "in_progress",
        "finalizing",
        "completed",
        "expired",
        "cancelling",
        "cancelled",
    )
    ENDED = ("failed", "completed", "expired", "cancelled")

    id = models.CharField(primary_key=True, max_length=40, editable=False)
    owner = models.CharField("API key", max_length=32, blank=True)
    endpoint = models.CharField(max_length=64)
    input_file = models.ForeignKey(BatchFile, null=True, on_delete=models.SET_NULL, related_name="batches")
    input_file_key = models.CharField("input file", max_length=40)
    completion_window = models.CharField(max_length=8, default="24h")
    status = models.CharField(max_length=16, default="validating", choices=[(s, s) for s in STATUSES])
    errors = models.JSONField(null=True, blank=True)
    metadata = models.JSONField(null=True, blank=True)
    labelled = models.BooleanField(default=False, help_text="A labelled run (manage.py evaluate_dataset).")
    total = models.PositiveIntegerField(default=0)
    completed = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    input_tokens = models.BigIntegerField(default=0)
    cached_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    expires_at = models.DateTimeField()
    in_progress_at = models.DateTimeField(null=True, blank=True)
    finalizing_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)
    expired_at = models.DateTimeField(null=True, blank=True)
    cancelling_at = models.DateTimeField(null=True, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at",)
        verbose_name_plural = "batches"
        indexes = (
            models.Index(fields=["owner", "created_at"], name="batch_owner_created"),
            models.Index(fields=["status"], name="batch_status"),
        )

    def __str__(self) -> str:
        return self.id

    @property
    def done(self) -> int:
        return self.completed + self.failed


class BatchItem(models.Model):
    """One line of a batch: pending, claimed by a worker (until its lease ends) or answered (`status_code` and
    the route's `response` body, or a line-level `error`)."""

    PENDING, CLAIMED, DONE = "pending", "claimed", "done"

    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="items")
    line = models.PositiveIntegerField()
    custom_id = models.CharField(max_length=512)
    state = models.CharField(max_length=8, default=PENDING)
    claimed_by = models.CharField(max_length=64, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    request_id = models.CharField(max_length=64, blank=True, db_index=True)
    response = models.TextField(blank=True, help_text="The route's response body, as it was sent.")
    error = models.JSONField(null=True, blank=True, help_text="A line-level error: {code, message}.")
    label = models.JSONField(null=True, blank=True, help_text="The expected answer of a labelled run.")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("batch", "line")
        constraints = (
            models.UniqueConstraint(fields=["batch", "custom_id"], name="batchitem_per_custom_id"),
            models.UniqueConstraint(fields=["batch", "line"], name="batchitem_per_line"),
        )
        indexes = (models.Index(fields=["batch", "state"], name="batchitem_state"),)

    def __str__(self) -> str:
        return f"{self.batch_id} line {self.line} ({self.custom_id})"

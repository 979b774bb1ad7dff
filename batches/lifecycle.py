"""A batch's life: created validating, then in progress, finalizing and completed (or failed, expired,
cancelling → cancelled), each step one conditional UPDATE, so two workers racing to take the same step take it
once. What the Batches API shows of it (`batch_object`) is read from the row, its counts kept by the items."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from django.db.models import QuerySet, Sum
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from audit.database import refreshed
from batches.models import Batch, BatchFile, BatchItem
from serving.refreshed import Unavailable

WINDOWS = {"24h": timedelta(hours=24)}
"""Completion windows a batch may ask for (OpenAI's one)."""
ACTIVE = ("validating", "in_progress", "finalizing", "cancelling")


def batch_id_new() -> str:
    return f"batch_{uuid.uuid4().hex[:24]}"


def batch_create(
    *,
    owner: str,
    endpoint: str,
    input_file: BatchFile,
    completion_window: str,
    metadata: dict[str, str] | None,
    labelled: bool = False,
) -> Batch:
    created = timezone.now()
    return Batch.objects.create(
        id=batch_id_new(),
        owner=owner,
        endpoint=endpoint,
        input_file=input_file,
        input_file_key=input_file.id,
        completion_window=completion_window,
        metadata=metadata,
        labelled=labelled,
        total=input_file.line_count,
        created_at=created,
        expires_at=created + WINDOWS[completion_window],
    )


def batch_step(*, batch_id: str, to: str, among: tuple[str, ...], **fields: Any) -> bool:
    """Move the batch to `to` if it is in one of `among` (stamping `<to>_at`); whether this call moved it."""
    stamp = timezone.now()
    values: dict[str, Any] = {"status": to, f"{to}_at": stamp, **fields}
    if to in Batch.ENDED:
        values["ended_at"] = stamp
    return Batch.objects.filter(pk=batch_id, status__in=among).update(**values) == 1


def batch_fail(*, batch_id: str, errors: list[dict[str, Any]]) -> bool:
    """Fail a batch that could not start (its input file), with OpenAI's `errors` list."""
    return batch_step(batch_id=batch_id, to="failed", among=("validating",), errors={"object": "list", "data": errors})


def batch_cancel(*, batch: Batch) -> Batch:
    """Ask the batch to stop: no new line starts once its workers see it; lines already running finish."""
    batch_step(batch_id=batch.id, to="cancelling", among=("validating", "in_progress"))
    batch.refresh_from_db()
    return batch


def batch_of_owner(*, batch_id: str, owner: str) -> Batch | None:
    return Batch.objects.filter(pk=batch_id, owner=owner).first()


def batch_expired(*, batch: Batch, now: datetime | None = None) -> bool:
    return batch.status in ACTIVE and (now or timezone.now()) >= batch.expires_at


def batches_prunable(*, before: datetime) -> tuple[QuerySet[Batch], QuerySet[BatchFile]]:
    """(batches that ended before `before`, uploads older than `before` that no other batch reads): what
    `batches_pruned` deletes (an ended batch's output and error files go with it)."""
    ended = Batch.objects.filter(status__in=Batch.ENDED, ended_at__lt=before)
    kept = Batch.objects.exclude(pk__in=ended.values("pk"))
    uploads = BatchFile.objects.filter(batch__isnull=True, created_at__lt=before).exclude(batches__in=kept)
    return ended, uploads


def batches_pruned(*, before: datetime) -> tuple[int, int]:
    """Delete batches that ended before `before`, with their items and output files, and uploads older than
    `before` that no batch kept reads; (batches, files) deleted. One batch at a time, so no transaction holds the
    database's write lock for long."""
    ended, uploads = batches_prunable(before=before)
    batch_ids = list(ended.values_list("pk", flat=True))
    for batch_id in batch_ids:
        BatchItem.objects.filter(batch_id=batch_id).delete()
        Batch.objects.filter(pk=batch_id).delete()
    file_count = uploads.count()
    uploads.delete()
    return len(batch_ids), file_count


def task_results_prunable(*, before: datetime) -> QuerySet[DBTaskResult]:
    """The task queue's records (django-tasks-db keeps one per task, a batch has one per chunk) of tasks that
    finished before `before`: the batches they ran hold what is worth keeping."""
    return DBTaskResult.objects.finished().filter(finished_at__lt=before)


def batches_overdue(*, now: datetime | None = None) -> list[str]:
    """Batches not ended whose completion window has closed: no worker has ended them (none runs, or all died),
    so nothing else will."""
    active = Batch.objects.filter(status__in=ACTIVE, expires_at__lte=now or timezone.now())
    return list(active.values_list("pk", flat=True))


def _queued_fetch() -> tuple[dict[str, int], float]:
    waiting = BatchItem.objects.filter(batch__status__in=ACTIVE).exclude(state=BatchItem.DONE)
    oldest = waiting.order_by("batch__created_at").values_list("batch__created_at", flat=True).first()
    done = Batch.objects.aggregate(completed=Sum("completed", default=0), failed=Sum("failed", default=0))
    lines = {"waiting": waiting.count(), "completed": done["completed"], "failed": done["failed"]}
    return lines, (timezone.now() - oldest).total_seconds() if oldest else 0.0


_queued = refreshed(name="batches", fetch=lambda keys: {key: _queued_fetch() for key in keys}, every=10.0, idle=300.0)
"""Read by the refresh thread, not the scrape: a database that is down or frozen never holds a scrape."""


def batches_queued() -> tuple[dict[str, int], float] | None:
    """(lines of stored batches by state: waiting, completed, failed; seconds the oldest active batch with lines
    waiting had waited) as last read, at most 10 s old while the database answers, for a scrape; None when this
    process has read none (a scrape never fails for it)."""
    try:
        return _queued.load_blocking("all")
    except Unavailable:
        return None


def _at(value: datetime | None) -> int | None:
    return int(value.timestamp()) if value else None


def batch_object(*, batch: Batch) -> dict[str, Any]:
    """The batch as OpenAI's `Batch`."""
    files = {f.kind: f.id for f in batch.files.all()}
    return {
        "id": batch.id,
        "object": "batch",
        "endpoint": batch.endpoint,
        "errors": batch.errors,
        "input_file_id": batch.input_file_key,
        "completion_window": batch.completion_window,
        "status": batch.status,
        "output_file_id": files.get(BatchFile.OUTPUT),
        "error_file_id": files.get(BatchFile.ERROR),
        "created_at": _at(batch.created_at),
        "in_progress_at": _at(batch.in_progress_at),
        "expires_at": _at(batch.expires_at),
        "finalizing_at": _at(batch.finalizing_at),
        "completed_at": _at(batch.completed_at),
        "failed_at": _at(batch.failed_at),
        "expired_at": _at(batch.expired_at),
        "cancelling_at": _at(batch.cancelling_at),
        "cancelled_at": _at(batch.cancelled_at),
        "request_counts": {"total": batch.total, "completed": batch.completed, "failed": batch.failed},
        "metadata": batch.metadata,
        "usage": {
            "input_tokens": batch.input_tokens,
            "input_tokens_details": {"cached_tokens": batch.cached_tokens},
            "output_tokens": batch.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": batch.input_tokens + batch.output_tokens,
        },
    }

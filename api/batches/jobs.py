"""Starting a batch job, one way for every caller: the routes (`POST /v1/files`, `POST /v1/batches`), `manage.py
batch` and `manage.py evaluate_dataset`. An input file is stored with the routes' limits and expiry, a batch
started over it under its owner's key and limits, and its validation queued for the task engine's workers; a
command that waits on its own batch may also do its work in its own process, as one more worker
(`batch_worked_here`)."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import IO

from asgiref.sync import async_to_sync
from django.conf import settings
from django.utils import timezone

from api.batches.owners import owner_of
from api.batches.requests import BatchAsked, batch_admitted, object_not_found
from api.batches.tasks import batch_validate, batch_work
from audit.callers import Caller
from batches.files import FileLimits, file_of_owner, file_store
from batches.lifecycle import batch_create
from batches.models import Batch, BatchFile

WAIT_SECONDS = 0.5
"""How long `batch_worked_here` waits when the lines left are all another worker's for now."""


def upload_stored(*, source: IO[bytes], filename: str, owner: str, purpose: str = "batch") -> BatchFile:
    """An input file stored line by line, within `OPENJEV_BATCH_MAX_LINES` and the line size limit, kept for
    `OPENJEV_BATCH_RETENTION_DAYS` (`batches.files.FileRefused` when it is not a batch file)."""
    config = settings.OPENJEV
    return file_store(
        source=source,
        filename=filename,
        owner=owner,
        purpose=purpose,
        limits=FileLimits(max_lines=config.batch_max_lines, max_line_bytes=config.batch_max_line_bytes),
        expires_at=timezone.now() + timedelta(days=config.batch_retention_days),
    )


def batch_started(*, caller: Caller | None, asked: BatchAsked, labelled: bool = False, queued: bool = True) -> Batch:
    """A batch over the caller's upload `asked` names (an `ApiError` 404 for any other file, 429 for one its key
    could never run within the window), its validation queued for the workers; `queued=False` leaves that to the
    caller (`batch_worked_here`), so no two validate it at once."""
    owner = owner_of(caller=caller)
    found = file_of_owner(file_id=asked.input_file_id, owner=owner)
    if found is None or found.batch_id is not None or found.purpose != "batch":
        raise object_not_found("File", asked.input_file_id)
    batch_admitted(caller=caller, lines=found.line_count)
    batch = batch_create(
        owner=owner,
        endpoint=asked.endpoint,
        input_file=found,
        completion_window=asked.completion_window,
        metadata=asked.metadata,
        labelled=labelled,
    )
    if queued:
        batch_validate.enqueue(batch.id)
    return batch


def batch_status(*, batch_id: str) -> str:
    return str(Batch.objects.values_list("status", flat=True).get(pk=batch_id))


def batch_worked_here(*, batch_id: str) -> None:
    """Do the batch's work in this process, with the tasks a worker runs: its validation (if it still waits for
    it), then its chunks until it ends. The engine's workers may share the chunks (a line is claimed by one);
    when every line left is claimed by another, this waits for them rather than spinning."""
    if batch_status(batch_id=batch_id) == "validating":
        async_to_sync(batch_validate.func)(batch_id)
    while batch_status(batch_id=batch_id) not in Batch.ENDED:
        before = Batch.objects.values_list("completed", "failed").get(pk=batch_id)
        async_to_sync(batch_work.func)(batch_id)
        if Batch.objects.values_list("completed", "failed").get(pk=batch_id) == before:
            time.sleep(WAIT_SECONDS)

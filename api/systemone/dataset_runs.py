"""A labelled dataset run on the batch machinery: its items are the lines of labelled batches (`Batch.labelled`,
`BatchItem.label`) sent to `/v1/systemone`, answered as every batch line is (the route's own service, stored once,
claimed by one worker at a time), each batch naming its run in its metadata.

Rerunning a run resumes it: a batch of it that has not ended is worked on again, and only the items no batch of it
answered are sent again, in new batches. Its report links the answered lines' stored evaluations to the run,
labels their answers, and keeps the metrics on the run, as before it ran on batches.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from typing import Any

import orjson
from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from api.batches.jobs import batch_started, upload_stored
from api.batches.requests import batch_asked
from api.systemone.datasets import QUESTION_ID, DatasetItem
from audit.models import DatasetRun, Evaluation, EvaluationAnswer
from batches.models import Batch, BatchItem
from calibration.labelled import labelled_report

RUN_KEY = "dataset_run"
"""The metadata key a labelled batch names its dataset run under."""
ENDPOINT = "/v1/systemone"
IN_CHUNK = 500
"""Ids a query names at once (SQLite takes a bounded number of parameters)."""


def item_custom_id(*, item: DatasetItem) -> str:
    return f"line-{item.line}"


def run_batches(*, run: DatasetRun) -> QuerySet[Batch]:
    return Batch.objects.filter(labelled=True, metadata__dataset_run=run.name).order_by("created_at")


def run_unfinished(*, run: DatasetRun) -> list[Batch]:
    """The run's batches that have not ended (its last run stopped before they did): resumed first."""
    return list(run_batches(run=run).exclude(status__in=Batch.ENDED))


def _answered(*, run: DatasetRun) -> dict[str, BatchItem]:
    """Each item the run's batches answered with a 2xx, by custom_id (a later answer wins)."""
    lines = BatchItem.objects.filter(
        batch__in=run_batches(run=run), state=BatchItem.DONE, status_code__gte=200, status_code__lt=300
    )
    return {line.custom_id: line for line in lines.order_by("finished_at")}


def run_batches_started(*, run: DatasetRun, items: Sequence[DatasetItem]) -> list[Batch]:
    """New batches over the items no batch of the run answered (each at most `OPENJEV_BATCH_MAX_LINES` lines), as
    `POST /v1/batches` starts one; their validation not queued, since this process works on them
    (`api.batches.jobs.batch_worked_here`)."""
    answered = _answered(run=run)
    pending = [item for item in items if item_custom_id(item=item) not in answered]
    size = settings.OPENJEV.batch_max_lines
    started = []
    for start in range(0, len(pending), size):
        lines = (
            orjson.dumps({"custom_id": item_custom_id(item=item), "method": "POST", "url": ENDPOINT, "body": item.body})
            + b"\n"
            for item in pending[start : start + size]
        )
        stored = upload_stored(source=io.BytesIO(b"".join(lines)), filename=f"{run.name}.jsonl", owner="")
        creation = {"input_file_id": stored.id, "endpoint": ENDPOINT, "metadata": {RUN_KEY: run.name}}
        started.append(batch_started(caller=None, asked=batch_asked(data=creation), labelled=True, queued=False))
    return started


def _chunks[T](values: Sequence[T]) -> Iterator[Sequence[T]]:
    for start in range(0, len(values), IN_CHUNK):
        yield values[start : start + IN_CHUNK]


def run_finish(*, run: DatasetRun, items: Sequence[DatasetItem]) -> tuple[dict[str, Any], int]:
    """Label the run's lines and their stored answers, link the evaluations to the run and keep its metrics;
    (metrics, items not answered)."""
    labels = {item_custom_id(item=item): item.label for item in items}
    lines_answered = _answered(run=run)
    answered = {line.request_id: labels[key] for key, line in lines_answered.items() if key in labels}
    now = timezone.now()
    with transaction.atomic():
        lines = list(BatchItem.objects.filter(batch__in=run_batches(run=run)).only("pk", "custom_id"))
        for line in lines:
            line.label = labels.get(line.custom_id)
        BatchItem.objects.bulk_update(lines, ["label"], batch_size=IN_CHUNK)
        for request_ids in _chunks(list(answered)):
            Evaluation.objects.filter(request_id__in=request_ids).update(dataset_run=run)
        for request_id, label in answered.items():
            EvaluationAnswer.objects.filter(evaluation__request_id=request_id, question_id=QUESTION_ID).update(
                label=label, labelled_at=now
            )
        answers = EvaluationAnswer.objects.filter(evaluation__dataset_run=run, evaluation__status_code=200)
        run.metrics = labelled_report(answers=answers)
        run.item_count, run.finished_at = len(items), now
        run.save(update_fields=["metrics", "item_count", "finished_at"])
    return run.metrics, len(items) - len(answered)

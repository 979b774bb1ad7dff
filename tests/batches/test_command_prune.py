"""`manage.py prune_batches`: a batch is kept `OPENJEV_BATCH_RETENTION_DAYS` after it ends, then deleted with its
lines and files, as are old uploads no kept batch reads; a batch whose window closed with no worker to end it is
ended as expired, so it is pruned in its turn. Its output file says when that will be."""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from api.decisions.openapi_examples import DECISIONS_REQUEST
from batches.models import Batch, BatchFile, BatchItem, FileLine
from tests.batches.conftest import batch_create, file_upload, jsonl, line_of, tasks_run
from tests.database import db

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

LINES = jsonl([line_of(custom_id=f"t-{i}", url="/v1/decisions", body=DECISIONS_REQUEST) for i in range(2)])
DAY = timedelta(days=1)


def _prune(*args: str) -> str:
    out = io.StringIO()
    call_command("prune_batches", *args, stdout=out)
    return out.getvalue()


async def _batch_run(api: Any) -> dict[str, Any]:
    uploaded = await file_upload(api, LINES)
    created = await batch_create(api, file_id=uploaded.json()["id"], endpoint="/v1/decisions")
    await tasks_run()
    batch: dict[str, Any] = (await api.get(f"/v1/batches/{created.json()['id']}")).json()
    assert batch["status"] == "completed"
    return batch


def _aged(*, batch_id: str | None = None, file_id: str | None = None, days: float) -> None:
    then = timezone.now() - timedelta(days=days)
    if batch_id is not None:
        Batch.objects.filter(pk=batch_id).update(ended_at=then)
    if file_id is not None:
        BatchFile.objects.filter(pk=file_id).update(created_at=then)


async def test_batches_ended_past_the_retention_go_with_their_lines_and_files_and_the_rest_stays(api, fake, store):
    old, recent = await _batch_run(api), await _batch_run(api)
    old_upload = (await file_upload(api, LINES)).json()["id"]
    new_upload = (await file_upload(api, LINES)).json()["id"]
    await db(lambda: _aged(batch_id=old["id"], file_id=old["input_file_id"], days=31))
    await db(lambda: _aged(batch_id=recent["id"], file_id=recent["input_file_id"], days=1))
    await db(lambda: _aged(file_id=recent["input_file_id"], days=40))  # an old upload a kept batch read
    await db(lambda: _aged(file_id=old_upload, days=31))

    counted = await db(lambda: _prune("--dry-run"))
    assert "Would delete 1 batch(es) and 2 upload(s) older than 30 day(s)" in counted
    assert await db(Batch.objects.count) == 2

    told = await db(lambda: _prune())
    assert "Deleted 1 batch(es) and 2 upload(s) older than 30 day(s)" in told
    for path in (f"/v1/batches/{old['id']}", f"/v1/files/{old['output_file_id']}", f"/v1/files/{old_upload}"):
        assert (await api.get(path)).status_code == 404, path
    for path in (f"/v1/batches/{recent['id']}", f"/v1/files/{recent['input_file_id']}", f"/v1/files/{new_upload}"):
        assert (await api.get(path)).status_code == 200, path
    assert await db(lambda: BatchItem.objects.filter(batch_id=old["id"]).exists()) is False
    assert await db(lambda: FileLine.objects.filter(file_id=old["input_file_id"]).exists()) is False
    assert (await api.get(f"/v1/files/{recent['output_file_id']}/content")).status_code == 200


async def test_the_queues_records_of_tasks_finished_past_the_retention_go_and_the_rest_stay(api, fake, store):
    await _batch_run(api)
    finished = await db(lambda: DBTaskResult.objects.finished().count())
    assert finished >= 2  # the validation and at least one chunk
    await db(lambda: DBTaskResult.objects.update(finished_at=timezone.now() - 31 * DAY))
    await _batch_run(api)
    told = await db(lambda: _prune())
    assert f"{finished} finished task record(s) deleted" in told
    assert await db(lambda: DBTaskResult.objects.finished().count()) >= 2  # the recent batch's


async def test_an_output_file_expires_when_its_batch_is_pruned(api, fake, store):
    batch = await _batch_run(api)
    output = (await api.get(f"/v1/files/{batch['output_file_id']}")).json()
    kept_until = timezone.now() + 30 * DAY
    assert abs(output["expires_at"] - kept_until.timestamp()) < 60


def _overdue() -> str:
    now = timezone.now()
    return Batch.objects.create(
        id="batch_000000000000000000overdue",
        endpoint="/v1/decisions",
        input_file_key="file-gone",
        status="in_progress",
        total=2,
        expires_at=now - DAY,
        in_progress_at=now - 2 * DAY,
    ).id


def test_a_batch_whose_window_closed_with_no_worker_ends_expired_and_is_pruned_in_its_turn():
    batch_id = _overdue()
    assert "1 batch(es) past their window would end as expired" in _prune("--dry-run")
    assert "1 batch(es) past their window ended as expired" in _prune()
    assert Batch.objects.get(pk=batch_id).status == "expired"
    assert "Deleted 0 batch(es)" in _prune()  # ended just now: kept for its retention
    assert "Deleted 1 batch(es)" in _prune("--days", "0")
    assert not Batch.objects.filter(pk=batch_id).exists()


def test_a_negative_retention_is_refused():
    with pytest.raises(CommandError, match="--days must not be negative"):
        _prune("--days", "-1")

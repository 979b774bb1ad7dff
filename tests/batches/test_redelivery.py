"""Batch tasks delivered twice or lost, in process on the real worker: a validation delivered again while it runs
starts the batch once and every line is answered; a batch whose tasks were lost (a broker restarted without its
queue) is picked up by the next worker to start; an answer whose claim another worker took over is dropped. The
crashes themselves: test_celery_crash.py, test_sdk_serve.py."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync
from django_tasks_db.models import DBTaskResult

from api.batches.tasks import batch_validate, batches_resume
from api.decisions.openapi_examples import DECISIONS_REQUEST
from audit.models import Evaluation
from batches.items import Claim, ItemAnswer, Written, answers_write, items_claim
from batches.models import Batch, BatchItem
from tests.batches.conftest import batch_create, file_upload, jsonl, line_of, output_lines, tasks_run
from tests.database import db

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


async def _batch(api, count: int) -> str:
    lines = [
        line_of(custom_id=f"line-{i}", url="/v1/decisions", body={**DECISIONS_REQUEST, "input": f"Ticket {i}"})
        for i in range(count)
    ]
    uploaded = await file_upload(api, jsonl(lines))
    created = await batch_create(api, file_id=uploaded.json()["id"], endpoint="/v1/decisions")
    return str(created.json()["id"])


async def _validated(batch_id: str, *, times: int) -> None:
    """Run the validation task's function `times` times at once, in a thread as a worker runs it (its database
    connections closed after)."""

    async def at_once() -> None:
        await asyncio.gather(*(batch_validate.func(batch_id) for _ in range(times)))

    await db(async_to_sync(at_once))


async def _status(batch_id: str) -> str:
    return await db(lambda: Batch.objects.get(pk=batch_id).status)


async def _answered_once(api, batch_id: str, count: int) -> None:
    batch = (await api.get(f"/v1/batches/{batch_id}")).json()
    assert batch["status"] == "completed", batch
    assert batch["request_counts"] == {"total": count, "completed": count, "failed": 0}
    output = output_lines((await api.get(f"/v1/files/{batch['output_file_id']}/content")).content)
    assert sorted(line["custom_id"] for line in output) == sorted(f"line-{i}" for i in range(count))
    assert await db(Evaluation.objects.count) == count


async def test_a_validation_delivered_again_while_it_runs_starts_the_batch_once(api, fake, store):
    batch_id = await _batch(api, 12)
    await db(DBTaskResult.objects.all().delete)  # the queued validation, run here twice at once instead
    await _validated(batch_id, times=2)
    assert await _status(batch_id) == "in_progress"
    await tasks_run()
    await _answered_once(api, batch_id, 12)


@pytest.mark.parametrize("lost_at", ["validating", "in_progress"])
async def test_a_batch_whose_tasks_were_lost_is_picked_up_when_a_worker_starts(api, fake, store, lost_at):
    batch_id = await _batch(api, 12)
    if lost_at == "in_progress":
        await db(DBTaskResult.objects.all().delete)
        await _validated(batch_id, times=1)
    await db(DBTaskResult.objects.all().delete)  # what the broker held is gone
    await tasks_run()
    assert await _status(batch_id) == lost_at  # nothing works on it
    assert await db(batches_resume) == 1  # a worker starts
    await tasks_run()
    await _answered_once(api, batch_id, 12)


async def test_an_answer_whose_claim_another_worker_took_over_is_not_written(api, fake, store):
    batch_id = await _batch(api, 2)
    await db(DBTaskResult.objects.all().delete)
    await _validated(batch_id, times=1)

    def raced() -> tuple[Written, Written, list[str]]:
        slow = items_claim(batch_id=batch_id, worker="host:1:slow", limit=2, lease=300)
        fast = items_claim(batch_id=batch_id, worker="host:2:fast", limit=2, lease=0)  # the slow one's lease ran out
        assert len(slow.items) == len(fast.items) == 2

        def answers(claim: Claim, request_id: str) -> list[tuple[Claim, ItemAnswer]]:
            return [(claim, ItemAnswer(item_id=i.pk, status_code=200, request_id=request_id)) for i in claim.items]

        late = answers_write(batch_id=batch_id, answers=answers(slow, "req_slow"))
        taken = answers_write(batch_id=batch_id, answers=answers(fast, "req_fast"))
        ids = list(BatchItem.objects.filter(batch_id=batch_id).values_list("request_id", flat=True))
        return late, taken, ids

    late, taken, request_ids = await db(raced)
    assert late.written == [] and len(late.lost) == 2  # the slow worker's answers are dropped, whole
    assert len(taken.written) == 2 and request_ids == ["req_fast", "req_fast"]
    batch = await db(lambda: Batch.objects.get(pk=batch_id))
    assert (batch.completed, batch.failed) == (2, 0)  # counted once


async def test_a_validation_delivered_again_after_the_batch_ran_changes_none_of_its_counts(api, fake, store):
    batch_id = await _batch(api, 4)
    await db(DBTaskResult.objects.all().delete)
    await _validated(batch_id, times=1)
    fake.fail_status = 400  # the backend refuses every line: each one fails while the batch runs
    await tasks_run()
    fake.fail_status = None
    before = (await api.get(f"/v1/batches/{batch_id}")).json()
    assert before["request_counts"]["failed"] == 4, before
    await _validated(batch_id, times=1)  # a late second delivery of the validation
    after = (await api.get(f"/v1/batches/{batch_id}")).json()
    assert (after["status"], after["request_counts"]) == (before["status"], before["request_counts"])

"""The batch tasks, enqueued through Django's tasks API on the engine `OPENJEV_TASK_ENGINE` names.

`batch_validate` checks every line before any model work (the batch fails with OpenAI's `errors` list when its
file is not a batch of this endpoint; a line whose body its route refuses goes to the error file with that
route's error) and creates one item per line; then `batch_work` tasks, one per `OPENJEV_BATCH_CHUNK_LINES`, each
answer lines until none is left to claim or they have answered a chunk (`api.batches.pipeline`). The last to
finish ends the batch. Every step can run twice without effect: a task delivered again (Celery after a killed
worker, `serve` restarted) finds what is done and does the rest.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.tasks import task
from django.utils import timezone

from api.batches.lines import LineInvalid, LineRequest, line_checked, line_read
from api.batches.owners import caller_of_owner
from api.batches.pipeline import chunk_answer
from batches.items import items_create, items_open, items_pending
from batches.lifecycle import batch_fail, batch_step
from batches.models import Batch, BatchItem, FileLine
from batches.output import batch_expire, batch_finish
from serving.evaluator import evaluator_start

log = logging.getLogger(__name__)

ERRORS_SHOWN = 100
"""Errors a failed batch lists (OpenAI's `errors.data`); a last one says how many more there were."""
LINES_PAGE = 500


@task
async def batch_validate(batch_id: str) -> None:
    evaluator_start()
    batch = await Batch.objects.aget(pk=batch_id)
    if batch.status == "cancelling":  # cancelled before it was validated: ended with nothing run
        await sync_to_async(batch_finish)(batch_id=batch_id)
    if batch.status != "validating":
        return
    if timezone.now() >= batch.expires_at:
        await sync_to_async(batch_expire)(batch_id=batch_id)
        return
    caller = await sync_to_async(caller_of_owner)(owner=batch.owner)
    errors: list[dict[str, Any]] = []
    items: list[BatchItem] = []
    seen: set[str] = set()
    async for number, text in _lines(file_id=batch.input_file_key):
        try:
            line = line_read(number=number, text=text, endpoint=batch.endpoint)
        except LineInvalid as exc:
            errors.append(exc.error)
            continue
        if line.custom_id in seen:
            errors.append(_duplicate(line=line))
            continue
        seen.add(line.custom_id)
        items.append(await _item_of(batch=batch, line=line, caller=caller))
    errors += _limits_broken(count=len(seen) + len(errors), batch=batch)
    if errors:
        await sync_to_async(batch_fail)(batch_id=batch_id, errors=_errors_shown(errors))
        return
    await sync_to_async(_items_start)(batch_id=batch_id, items=items)


async def _lines(*, file_id: str) -> Any:
    """(number, text) of the file's lines, a page at a time."""
    last = 0
    while True:
        page = [
            (line.number, line.text)
            async for line in FileLine.objects.filter(file_id=file_id, number__gt=last).order_by("number")[:LINES_PAGE]
        ]
        if not page:
            return
        for entry in page:
            yield entry
        last = page[-1][0]


def _duplicate(*, line: LineRequest) -> dict[str, Any]:
    return {
        "code": "duplicate_custom_id",
        "message": f"line {line.number}: custom_id is also the custom_id of an earlier line; each must be unique",
        "param": "custom_id",
        "line": line.number,
    }


def _limits_broken(*, count: int, batch: Batch) -> list[dict[str, Any]]:
    maximum = settings.OPENJEV.batch_max_lines
    if count <= maximum:
        return []
    message = f"the input file has {count} requests; a batch takes at most {maximum}"
    return [{"code": "too_many_requests", "message": message, "param": None, "line": None}]


def _errors_shown(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    shown = errors[:ERRORS_SHOWN]
    if len(errors) > ERRORS_SHOWN:
        more = len(errors) - ERRORS_SHOWN
        shown.append({"code": "more_errors", "message": f"and {more} more", "param": None, "line": None})
    return shown


async def _item_of(*, batch: Batch, line: LineRequest, caller: Any) -> BatchItem:
    """The line's item: pending, or answered already with its route's error when its body is refused."""
    item = BatchItem(batch_id=batch.id, line=line.number, custom_id=line.custom_id)
    refused = await line_checked(line=line, caller=caller)
    if refused is not None:
        item.state, item.status_code = BatchItem.DONE, refused.status_code
        item.response = refused.content.decode()
        item.request_id = refused.get("x-typesafe-request-id", "")
        item.error = {
            "code": "invalid_request",
            "message": f"line {line.number}: its route refused the body ({refused.status_code})",
            "line": line.number,
        }
        item.finished_at = timezone.now()
    return item


def _items_start(*, batch_id: str, items: list[BatchItem]) -> None:
    """Store the items, start the batch and enqueue its work (or end it at once when no line is left to run)."""
    items_create(batch_id=batch_id, items=items)
    refused = sum(1 for item in items if item.state == BatchItem.DONE)
    # Only while it is validating: another delivery of this task may have started it already, and its workers'
    # failures since then are counted in `failed`.
    Batch.objects.filter(pk=batch_id, status="validating").update(total=len(items), failed=refused)
    if not batch_step(batch_id=batch_id, to="in_progress", among=("validating",)):
        # Cancelled while it was validated (ended with nothing run), or started by another delivery of this task
        # (which enqueued the work: ending it here would end a batch with lines still to answer).
        if Batch.objects.filter(pk=batch_id, status="cancelling").exists():
            batch_finish(batch_id=batch_id)
        return
    pending = len(items) - refused
    if pending == 0:
        batch_finish(batch_id=batch_id)
        return
    for _ in range(math.ceil(pending / settings.OPENJEV.batch_chunk_lines)):
        batch_work.enqueue(batch_id)


def batches_resume() -> int:
    """Hand every unfinished batch a task again, as a worker starts: work a broker lost (Redis restarted without its
    append-only file) or a worker on another machine took down with it is picked up, and a task more than needed
    finds its lines done or taken and ends. The number of batches handed one."""
    active = Batch.objects.filter(status__in=("validating", "in_progress", "cancelling"))
    count = 0
    for batch_id, status in active.values_list("pk", "status").iterator():
        (batch_validate if status == "validating" else batch_work).enqueue(batch_id)
        count += 1
    if count:
        log.info("handed %d unfinished batch(es) a task each", count)
    return count


@task
async def batch_work(batch_id: str) -> None:
    evaluator_start()  # a worker process builds its own evaluator once (idempotent); lines wait for it
    await chunk_answer(batch_id=batch_id)
    await sync_to_async(_batch_settle)(batch_id=batch_id)


def _batch_settle(*, batch_id: str) -> None:
    """After a chunk: end the batch when nothing of it is left open (or it was cancelled, or its window closed),
    whichever task gets here last, once; else hand on the work. A task whose chunk is done while lines still wait
    enqueues its own successor, so a batch keeps as many tasks as it started with (never more, never none)."""
    batch = Batch.objects.get(pk=batch_id)
    if batch.status in Batch.ENDED:
        return
    config = settings.OPENJEV
    open_count, claims_end = items_open(batch_id=batch_id, lease=config.batch_lease_seconds)
    if timezone.now() >= batch.expires_at:
        batch_expire(batch_id=batch_id)
    elif open_count == 0 or (batch.status == "cancelling" and claims_end is None):
        batch_finish(batch_id=batch_id)
    elif batch.status == "in_progress" and items_pending(batch_id=batch_id):
        batch_work.enqueue(batch_id)
    elif claims_end is not None:
        # Lines still claimed by another worker: if it died, its claims end then, and this task takes them.
        batch_work.using(run_after=claims_end).enqueue(batch_id)

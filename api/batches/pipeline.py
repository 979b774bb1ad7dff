"""A batch worker's loop: claim lines ahead, answer `OPENJEV_BATCH_CONCURRENCY` at a time, write answers in
groups, and stop within a moment when the batch is cancelled or runs out of time.

A task claims for at most half a lease (`OPENJEV_BATCH_LEASE_SECONDS`), then ends and hands on to a successor:
Celery's broker delivers a task again when it is not acknowledged within the lease (its visibility timeout: the
worker may be dead), so a task that ran longer would be run twice at once.

Claims, writes and status reads are database calls in the task's thread; the lines are answered concurrently on
its event loop, so the backend always has a line waiting while answers are written.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field

from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils import timezone

from api.batches.lines import line_answered, line_read
from api.batches.owners import caller_of_owner
from api.batches.recovery import worker_id_local
from audit.callers import Caller
from batches.items import Claim, ItemAnswer, answers_write, items_claim, items_release
from batches.models import Batch, BatchItem, FileLine

WRITE_EVERY = 32
"""Answers written in one transaction (or fewer, after `WRITE_SECONDS`)."""
WRITE_SECONDS = 0.2
STATUS_SECONDS = 0.5
"""How often the loop reads the batch's status: a cancel stops new lines within about this."""


@dataclass
class _Run:
    batch_id: str
    batch: Batch
    caller: Caller | None
    worker: str
    budget: int
    """Lines this task may still claim (`OPENJEV_BATCH_CHUNK_LINES`)."""
    claims_end: float
    """When (`time.monotonic()`) this task stops claiming: half a lease after it started."""
    stopping: bool = False
    queue: asyncio.Queue[tuple[Claim, BatchItem, str] | None] = field(default_factory=asyncio.Queue)
    answered: list[tuple[Claim, ItemAnswer]] = field(default_factory=list)
    status_read: float = 0.0


def worker_name() -> str:
    """`host:pid:run`: which run of which process holds a claim (`api.batches.recovery` reads the pid)."""
    return f"{worker_id_local()}:{uuid.uuid4().hex[:8]}"


async def chunk_answer(*, batch_id: str) -> None:
    """Answer lines of the batch until none is left to claim, the chunk is done, or the batch stops."""
    batch = await Batch.objects.aget(pk=batch_id)
    if batch.status != "in_progress":
        return
    config = settings.OPENJEV
    run = _Run(
        batch_id=batch_id,
        batch=batch,
        caller=await sync_to_async(caller_of_owner)(owner=batch.owner),
        worker=worker_name(),
        budget=config.batch_chunk_lines,
        claims_end=time.monotonic() + config.batch_lease_seconds / 2,
    )
    lanes = [asyncio.create_task(_lane(run)) for _ in range(config.batch_concurrency)]
    try:
        await _claims_feed(run, lanes=len(lanes))
        await asyncio.gather(*lanes)
    finally:
        for lane in lanes:
            lane.cancel()
        await _answers_flush(run)


async def _claims_feed(run: _Run, *, lanes: int) -> None:
    """Keep the lanes fed with claimed lines, a few ahead, until there are none or the batch stops."""
    config = settings.OPENJEV
    while not run.stopping and run.budget > 0 and time.monotonic() < run.claims_end:
        if run.queue.qsize() >= lanes:
            await asyncio.sleep(0.005)
            await _status_check(run)
            continue
        claim = await sync_to_async(items_claim)(
            batch_id=run.batch_id, worker=run.worker, limit=min(lanes, run.budget), lease=config.batch_lease_seconds
        )
        if not claim.items:
            break
        run.budget -= len(claim.items)
        texts = await sync_to_async(_texts_of)(file_id=run.batch.input_file_key, claim=claim)
        for item in claim.items:
            run.queue.put_nowait((claim, item, texts.get(item.line, "")))
        await _status_check(run)
    for _ in range(lanes):
        run.queue.put_nowait(None)


def _texts_of(*, file_id: str, claim: Claim) -> dict[int, str]:
    numbers = [item.line for item in claim.items]
    return dict(FileLine.objects.filter(file_id=file_id, number__in=numbers).values_list("number", "text"))


async def _status_check(run: _Run) -> None:
    now = time.monotonic()
    if now - run.status_read < STATUS_SECONDS:
        return
    run.status_read = now
    batch = await Batch.objects.aget(pk=run.batch_id)
    if batch.status != "in_progress" or timezone.now() >= batch.expires_at:
        run.stopping = True


async def _lane(run: _Run) -> None:
    """Answer queued lines one at a time; a stopping batch's queued lines are given back unanswered."""
    priority = settings.OPENJEV.batch_priority
    while (entry := await run.queue.get()) is not None:
        claim, item, text = entry
        if run.stopping:
            await sync_to_async(items_release)(claim=claim, item_ids=[item.pk])
            continue
        line = line_read(number=item.line, text=text, endpoint=run.batch.endpoint)
        answer = await line_answered(item_id=item.pk, line=line, caller=run.caller, priority=priority)
        run.answered.append((claim, answer))
        if len(run.answered) >= WRITE_EVERY:
            await _answers_flush(run)


async def _answers_flush(run: _Run) -> None:
    if not run.answered:
        return
    answers, run.answered = run.answered, []
    await sync_to_async(answers_write)(batch_id=run.batch_id, answers=answers)

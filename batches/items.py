"""A batch's items: claimed by one worker at a time, answered once.

A worker claims a few pending lines (or lines whose claim outlived its lease: their worker died) in one
conditional UPDATE, answers them, and writes each answer only while its claim still holds, in the same
transaction as the stored evaluations of those lines and the batch's counts. So a chunk delivered twice skips
what is done, a worker killed mid-chunk leaves its lines to others once the lease ends, and a line is never
answered twice in the output nor stored twice among the evaluations, even when two workers raced for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from audit.storage.records import StoredEvaluation
from audit.storage.rows import evaluation_rows_build
from audit.storage.sql import rows_insert
from audit.storage.usage import usage_add, usage_totals
from batches.models import Batch, BatchItem


@dataclass(frozen=True)
class Claim:
    worker: str
    at: datetime
    items: tuple[BatchItem, ...]


@dataclass(frozen=True)
class ItemAnswer:
    """What one line got: the route's status and body (or a line-level error), and its stored evaluations."""

    item_id: int
    status_code: int | None
    request_id: str = ""
    response: str = ""
    error: dict[str, Any] | None = None
    records: tuple[StoredEvaluation, ...] = ()
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


@dataclass
class Written:
    """What a write took: answers whose claim still held, and those a faster worker had taken."""

    written: list[int] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)


def items_create(*, batch_id: str, items: Sequence[BatchItem]) -> None:
    for start in range(0, len(items), 1000):
        with transaction.atomic():
            BatchItem.objects.bulk_create(items[start : start + 1000], ignore_conflicts=True)


def items_claim(*, batch_id: str, worker: str, limit: int, lease: float) -> Claim:
    """Up to `limit` lines for `worker`: pending ones, or ones whose claim is older than `lease` seconds."""
    now = timezone.now()
    free = Q(state=BatchItem.PENDING) | Q(state=BatchItem.CLAIMED, claimed_at__lt=now - timedelta(seconds=lease))
    with transaction.atomic():
        ids = list(
            BatchItem.objects.filter(free, batch_id=batch_id).order_by("line").values_list("pk", flat=True)[:limit]
        )
        if ids:
            BatchItem.objects.filter(free, pk__in=ids).update(
                state=BatchItem.CLAIMED, claimed_by=worker, claimed_at=now, attempts=F("attempts") + 1
            )
    claimed = BatchItem.objects.filter(pk__in=ids, state=BatchItem.CLAIMED, claimed_by=worker, claimed_at=now)
    return Claim(worker=worker, at=now, items=tuple(claimed.order_by("line")))


def answers_write(*, batch_id: str, answers: Sequence[tuple[Claim, ItemAnswer]]) -> Written:
    """Write the answers whose claim still holds, their stored evaluations and the batch's counts, in one
    transaction (see the module): which claims hold is read under the rows' lock (a claimer waits for it), then
    the answers that hold are written together."""
    claims = {answer.item_id: claim for claim, answer in answers}
    finished = timezone.now()
    with transaction.atomic():
        claimed = BatchItem.objects.select_for_update().filter(pk__in=list(claims), state=BatchItem.CLAIMED)
        held = {
            pk
            for pk, worker, at in claimed.values_list("pk", "claimed_by", "claimed_at")
            if (worker, at) == (claims[pk].worker, claims[pk].at)
        }
        kept = [answer for _, answer in answers if answer.item_id in held]
        _answers_update(answers=kept, finished=finished)
        _records_write(records=[r for a in kept for r in a.records])
        Batch.objects.filter(pk=batch_id).update(
            completed=F("completed") + sum(a.succeeded for a in kept),
            failed=F("failed") + sum(not a.succeeded for a in kept),
            input_tokens=F("input_tokens") + sum(a.input_tokens for a in kept),
            cached_tokens=F("cached_tokens") + sum(a.cached_tokens for a in kept),
            output_tokens=F("output_tokens") + sum(a.output_tokens for a in kept),
        )
    return Written(written=[a.item_id for a in kept], lost=[a.item_id for _, a in answers if a.item_id not in held])


ANSWER_FIELDS = ("state", "status_code", "request_id", "response", "error", "finished_at")


def _answers_update(*, answers: Sequence[ItemAnswer], finished: datetime) -> None:
    """One UPDATE per answer, sent as one `executemany` with the values adapted by their own fields (the ORM's
    `update` and `bulk_update` compiled a statement per call: four fifths of the write's time)."""
    if not answers:
        return
    meta = BatchItem._meta
    by_name = {field.name: field for field in meta.concrete_fields}
    fields = [by_name[name] for name in ANSWER_FIELDS]
    quote = connection.ops.quote_name
    assignments = ", ".join(f"{quote(str(field.column))} = %s" for field in fields)
    sql = f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {quote(str(by_name['id'].column))} = %s"
    params = [
        [
            field.get_db_prep_save(value, connection)
            for field, value in zip(
                fields, (BatchItem.DONE, a.status_code, a.request_id, a.response, a.error, finished), strict=True
            )
        ]
        + [a.item_id]
        for a in answers
    ]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


def _records_write(*, records: list[StoredEvaluation]) -> None:
    """The lines' evaluations as the storage writer stores them (at level `off`, their usage only)."""
    if not records:
        return
    usage_add(totals=usage_totals(records=records))
    rows = [evaluation_rows_build(record=r) for r in records if r.level != "off"]
    if rows:
        rows_insert(rows)


def items_release(*, claim: Claim, item_ids: Sequence[int]) -> None:
    """Give lines back unanswered (the batch is stopping): pending again, for nobody or a later worker."""
    BatchItem.objects.filter(
        pk__in=list(item_ids), state=BatchItem.CLAIMED, claimed_by=claim.worker, claimed_at=claim.at
    ).update(state=BatchItem.PENDING, claimed_by="", claimed_at=None)


def items_open(*, batch_id: str, lease: float) -> tuple[int, datetime | None]:
    """(lines not answered yet, when the youngest live claim among them ends: None when none is claimed)."""
    open_items = BatchItem.objects.filter(batch_id=batch_id).exclude(state=BatchItem.DONE)
    count = open_items.count()
    last = open_items.filter(state=BatchItem.CLAIMED).order_by("-claimed_at").values_list("claimed_at", flat=True)
    youngest = last.first()
    return count, (youngest + timedelta(seconds=lease)) if youngest else None


def items_pending(*, batch_id: str) -> bool:
    """Whether lines of the batch wait unclaimed (a chunk's successor has work)."""
    return BatchItem.objects.filter(batch_id=batch_id, state=BatchItem.PENDING).exists()

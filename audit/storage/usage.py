"""Usage per API key per day, counted by the storage writer from the evaluations it is handed: one upsert per
(key, day) of a batch, so the request path does nothing for it and several processes add up."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date

from django.db import connection, transaction

from audit.models import KeyUsage
from audit.storage.records import StoredEvaluation

Totals = dict[tuple[str, date], list[int]]
"""(key label, UTC day) -> [evaluations, questions, input tokens, cached tokens]."""


def usage_totals(*, records: Iterable[StoredEvaluation]) -> Totals:
    """What the answered evaluations among `records` add, per key and day."""
    totals: Totals = {}
    for record in records:
        outcome = record.outcome
        if outcome is None:
            continue
        key = (record.caller.label if record.caller else "", record.created_at.astimezone(UTC).date())
        row = totals.setdefault(key, [0, 0, 0, 0])
        row[0] += 1
        row[1] += len(outcome.answers)
        row[2] += outcome.usage.input_tokens
        row[3] += outcome.cached_tokens or 0
    return totals


def usage_add(*, totals: Totals) -> None:
    """Add `totals` to the stored counts in one statement (an upsert SQLite and PostgreSQL both take)."""
    if not totals:
        return
    table = connection.ops.quote_name(KeyUsage._meta.db_table)
    counts = ("evaluations", "questions", "input_tokens", "cached_tokens")
    updates = ", ".join(f"{c} = {table}.{c} + excluded.{c}" for c in counts)
    values = ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(totals))
    params: list[str | date | int] = []
    for (label, day), row in totals.items():
        params += [label, day, *row]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (key_label, day, {', '.join(counts)}) VALUES {values} "
            f"ON CONFLICT (key_label, day) DO UPDATE SET {updates}",
            params,
        )


def usage_export(*, since: date, until: date | None = None, key_label: str | None = None) -> list[dict[str, object]]:
    """The stored counts from `since` (to `until`, both included), oldest first, as plain values (the admin's
    chart and `manage.py usage` read them)."""
    rows = KeyUsage.objects.filter(day__gte=since)
    if until is not None:
        rows = rows.filter(day__lte=until)
    if key_label is not None:
        rows = rows.filter(key_label=key_label)
    return [
        {
            "key": row["key_label"],
            "day": row["day"].isoformat(),
            "evaluations": row["evaluations"],
            "questions": row["questions"],
            "input_tokens": row["input_tokens"],
            "cached_tokens": row["cached_tokens"],
        }
        for row in rows.order_by("day", "key_label").values()
    ]

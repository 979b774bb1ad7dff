"""Usage per API key per day, counted by the spool's drainer from the evaluations it writes: one upsert per
(key, day) of a batch, so the request path does nothing for it and several processes add up.

At storage level `off` nothing is spooled: an answer's usage is added to this process's `UsageTally` in memory and
written by the drainer within `TALLY_SECONDS`, so an answer at `off` waits for no disk (a SIGKILL or a power loss
loses at most that last second's counts; an outage keeps them in memory until the database answers)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from datetime import UTC, date

from django.db import connection, transaction

from audit.models import KeyUsage
from audit.storage.records import StoredEvaluation

Totals = dict[tuple[str, date], list[int]]
"""(key label, UTC day) -> [evaluations, questions, input tokens, cached tokens]."""


TALLY_SECONDS = 1.0
"""The longest a tallied count waits in memory before the drainer writes it (while the database answers)."""


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


def totals_merged(*, into: Totals, totals: Totals) -> Totals:
    """`into` with `totals` added (the same key and day summed); `into` is changed and returned."""
    for key, counts in totals.items():
        row = into.setdefault(key, [0, 0, 0, 0])
        for i, count in enumerate(counts):
            row[i] += count
    return into


class UsageTally:
    """Key usage of the evaluations not stored (level `off`), held in memory until the drainer writes it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals: Totals = {}
        self._since = 0.0
        self.asked = False
        """A drain was asked for: write what is held now, not when it is due."""

    @property
    def pending(self) -> bool:
        return bool(self._totals)

    def add(self, *, record: StoredEvaluation) -> None:
        totals = usage_totals(records=[record])
        with self._lock:
            if not self._totals:
                self._since = time.monotonic()
            totals_merged(into=self._totals, totals=totals)

    def due(self) -> bool:
        return bool(self._totals) and (self.asked or time.monotonic() - self._since >= TALLY_SECONDS)

    def taken(self) -> Totals:
        """What is held, now the caller's to write (`returned` if it could not be)."""
        with self._lock:
            totals, self._totals = self._totals, {}
            return totals

    def returned(self, totals: Totals) -> None:
        with self._lock:
            if not self._totals:
                self._since = time.monotonic()
            totals_merged(into=self._totals, totals=totals)


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

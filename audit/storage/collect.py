"""Stored evaluations collected by their caller instead of queued for the writer thread.

A batch job answers its lines through the wire formats' own services, which hand every evaluation to
`evaluation_store`; inside `records_collected` those records are kept for the batch worker, which writes them
in the same transaction as the items they answer (`audit.storage.sql.rows_insert`), so a worker killed
mid-chunk leaves either both the item's result and its stored evaluation or neither.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

from audit.storage.records import StoredEvaluation

_collector: contextvars.ContextVar[list[StoredEvaluation] | None] = contextvars.ContextVar(
    "openjev_records_collected", default=None
)


@contextmanager
def records_collected() -> Iterator[list[StoredEvaluation]]:
    """Collect, in this context (and the tasks it starts), every evaluation that would be stored."""
    collected: list[StoredEvaluation] = []
    token = _collector.set(collected)
    try:
        yield collected
    finally:
        _collector.reset(token)


def record_collected(*, record: StoredEvaluation) -> bool:
    """Keep `record` for the collecting caller; False when nobody collects here (the writer stores it)."""
    collected = _collector.get()
    if collected is None:
        return False
    collected.append(record)
    return True

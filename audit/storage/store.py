"""`evaluation_store`: hand one stored evaluation to the writer thread, never raising, never waiting.

On the writer thread, a batch is inserted in one transaction; when the database refuses the batch
(a NUL PostgreSQL cannot store, a lone surrogate no UTF-8 driver encodes), its rows are retried one
by one, scrubbed if need be, so one bad row never sinks the others. An unreachable database or a
missing schema fails the batch at once with one log line instead.
"""

from __future__ import annotations

import logging
import time

from django.db import DatabaseError, InterfaceError, OperationalError, connections

from audit.storage.records import StoredEvaluation
from audit.storage.rows import Row, evaluation_rows_build, row_scrub
from audit.storage.sql import rows_insert
from audit.storage.usage import usage_add, usage_totals
from audit.storage.writer import schema_missing, writer, writes_retried

log = logging.getLogger(__name__)


class EvaluationSink:
    """The writer's sink for stored evaluations."""

    name = "evaluations"

    def __init__(self) -> None:
        self._last_schema_log = 0.0

    def write(self, jobs: list[StoredEvaluation]) -> int:
        usage_sink.write(jobs)
        rows = []
        for record in jobs:
            try:
                rows.append(evaluation_rows_build(record=record))
            except Exception:
                log.exception("could not store evaluation %s: building its row failed", record.request_id)
        if not rows:
            return 0
        try:
            writes_retried(lambda: rows_insert(rows), what="evaluation storage")
            return len(rows)
        except Exception as exc:
            connections.close_all()
            if schema_missing(exc):
                now = time.monotonic()
                if now - self._last_schema_log > 60:
                    self._last_schema_log = now
                    log.error("cannot store evaluations: the tables are missing (%s); run `manage.py migrate`", exc)
                return 0
            if isinstance(exc, OperationalError | InterfaceError):  # the database is unreachable: give up
                log.error(
                    "could not store %d evaluation(s) (%s): the database is unavailable: %s",
                    len(rows),
                    ", ".join(r[0]["request_id"] for r in rows[:5]),
                    exc,
                )
                return 0
            log.warning("storing a batch of %d evaluations failed (%s); retrying one by one", len(rows), exc)
        return sum(_row_write(row) for row in rows)


class UsageSink:
    """The writer's sink for usage per key per day: the evaluation sink hands it every batch, and at level
    `off` answered evaluations come here alone. Its own transaction: a batch retried row by row must not
    count twice."""

    name = "key-usage"

    def write(self, jobs: list[StoredEvaluation]) -> int:
        try:
            totals = usage_totals(records=jobs)
            writes_retried(lambda: usage_add(totals=totals), what="key usage")
        except Exception:
            log.warning("could not count the usage of %d evaluation(s)", len(jobs), exc_info=True)
            connections.close_all()
            return 0
        return len(jobs)


def _row_write(row: Row) -> bool:
    try:
        try:
            rows_insert([row])
        except (DatabaseError, UnicodeError):
            connections.close_all()
            rows_insert([row_scrub(row)])
        return True
    except Exception:
        log.exception("could not store evaluation %s", row[0]["request_id"])
        connections.close_all()
        return False


sink = EvaluationSink()
usage_sink = UsageSink()


def evaluation_store(*, record: StoredEvaluation) -> None:
    """Queue one evaluation for the writer (at level `off` only an answered one, for its usage). Never raises."""
    try:
        if record.level != "off":
            writer.submit(sink=sink, job=record)
        elif record.outcome is not None:
            writer.submit(sink=usage_sink, job=record)
    except Exception:
        log.exception("could not queue evaluation %s for storage", record.request_id)
        writer.stats.add(sink=sink.name, failed=1)


def storage_stats() -> dict[str, float]:
    """Counters since the process started: submitted, stored, failed, dropped, pending, batches, writer CPU."""
    evaluations = writer.stats.of(sink.name)
    return {
        "submitted": evaluations.submitted,
        "stored": evaluations.written,
        "failed": evaluations.failed,
        "dropped": evaluations.dropped,
        "pending": writer.pending,
        "batches": writer.stats.batches,
        "writer_cpu_s": writer.stats.cpu_s,
    }

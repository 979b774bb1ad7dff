"""`evaluation_store`: make one stored evaluation durable, in the spool on disk, and let the drainer write it.

The request path hands the record to the spool (`audit.storage.spool`) and gets a future that resolves once the
record is synced to disk; the API answers after it (`api.plumbing.recording`), so an answered evaluation survives a
database outage of any length and a SIGKILL. The spool's drainer (`audit.storage.drain`) writes batches into the
database in one transaction each, the usage per key per day in the same transaction; when the database refuses a
batch for one of its rows (a NUL PostgreSQL cannot store, a lone surrogate no UTF-8 driver encodes), its rows are
written one by one, scrubbed if need be, so one bad row never sinks the others. An unreachable database, a locked
one or a missing schema keeps the batch in the spool, tried again until it is in.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import logging
import os
import pickle
import threading
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection, connections, transaction

from audit.models import Evaluation
from audit.storage.collect import record_collected
from audit.storage.drain import Drainer, StorageUnavailable
from audit.storage.records import StoredEvaluation
from audit.storage.rows import Row, evaluation_rows_build, row_scrub
from audit.storage.spool import Spool, SpoolFull
from audit.storage.sql import rows_insert
from audit.storage.usage import Totals, totals_merged, usage_add, usage_totals
from audit.storage.writer import schema_missing, stage_register
from serving import metrics

log = logging.getLogger(__name__)

Entry = tuple[Row | None, Totals]
"""What one spooled evaluation holds: its rows (none at level `off`) and what it adds to its key's usage."""


def record_encode(record: Any) -> bytes | None:
    """The spool's payload for `record` (on the spool's thread, off the event loop); None: nothing to store."""
    row = None
    try:
        row = evaluation_rows_build(record=record)
    except Exception:
        log.exception("could not store evaluation %s: building its row failed", record.request_id)
    totals = usage_totals(records=[record])
    if row is None and not totals:
        return None
    return pickle.dumps((row, totals), protocol=pickle.HIGHEST_PROTOCOL)


def _entries(payloads: list[bytes]) -> list[Entry]:
    entries = []
    for payload in payloads:
        try:
            entries.append(pickle.loads(payload))
        except Exception:
            log.exception("a spooled evaluation cannot be read back; it is skipped")
    return entries


def _stored_already(entries: list[Entry]) -> list[Entry]:
    """The entries whose evaluation is not in the database yet (a batch tried again may have been committed)."""
    ids = [row[0]["request_id"] for row, _ in entries if row is not None]
    found = set(Evaluation.objects.filter(request_id__in=ids).values_list("request_id", flat=True)) if ids else set()
    return [(row, totals) for row, totals in entries if row is None or row[0]["request_id"] not in found]


def _totals_merged(entries: list[Entry]) -> Totals:
    merged: Totals = {}
    for _, totals in entries:
        totals_merged(into=merged, totals=totals)
    return merged


def tally_write(totals: Totals) -> None:
    """The drainer's write of key usage tallied at level `off`; StorageUnavailable while the database cannot."""
    try:
        usage_add(totals=totals)
    except (OperationalError, InterfaceError) as exc:
        raise StorageUnavailable(str(exc)) from exc


def frames_write(payloads: list[bytes], dedupe: bool) -> int:
    """The drainer's write: the batch's rows and usage in one transaction; how many entries are stored."""
    if spool_directory() != pipeline.directory:  # the database was swapped under the spool (tests, a bench)
        raise StorageUnavailable("this spool belongs to another database; it is left for a process on that one")
    entries = _entries(payloads)
    skipped = len(payloads) - len(entries)
    try:
        if dedupe:
            entries = _stored_already(entries)
        rows = [row for row, _ in entries if row is not None]
        with transaction.atomic():
            rows_insert(rows)
            usage_add(totals=_totals_merged(entries))
        return len(payloads) - skipped
    except (OperationalError, InterfaceError) as exc:
        raise StorageUnavailable(str(exc)) from exc
    except DatabaseError as exc:
        if schema_missing(exc):
            raise StorageUnavailable(f"the tables are missing ({exc}); run `manage.py migrate`") from None
        log.warning("storing a batch of %d evaluations failed (%s); retrying one by one", len(entries), exc)
    except UnicodeError as exc:
        log.warning("storing a batch of %d evaluations failed (%s); retrying one by one", len(entries), exc)
    connections.close_all()
    return sum(_entry_write(entry) for entry in entries)


def _entry_write(entry: Entry) -> bool:
    row, totals = entry
    try:
        with transaction.atomic():
            if row is not None:
                try:
                    with transaction.atomic():
                        rows_insert([row])
                except (DatabaseError, UnicodeError):
                    rows_insert([row_scrub(row)])
            usage_add(totals=totals)
        return True
    except (OperationalError, InterfaceError) as exc:
        raise StorageUnavailable(str(exc)) from exc
    except Exception:
        log.exception("could not store evaluation %s", row[0]["request_id"] if row else "(usage only)")
        connections.close_all()
        return False


class Pipeline:
    """This process's spool and its drainer, started on first use, again after a fork, and again (in another
    folder) when the database it writes to is not the one it was started for."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = 0
        self.directory: Path | None = None
        self.spool: Spool | None = None
        """None until the first evaluation of this process."""
        self.drainer: Drainer | None = None
        self.refused = 0
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        """A forked child has the parent's objects but none of its threads: it starts its own on first use."""
        self._lock = threading.Lock()
        self.spool, self.drainer, self.directory = None, None, None

    def started(self) -> tuple[Spool, Drainer]:
        directory = spool_directory()
        spool, drainer = self.spool, self.drainer
        if spool is not None and drainer is not None and self._pid == os.getpid() and self.directory == directory:
            return spool, drainer
        if spool is not None and self.directory != directory:
            self.stop(timeout=0.0)  # what it holds stays in its folder, for a process on its database
        with self._lock:
            if self.spool is None or self.drainer is None or self._pid != os.getpid():
                self._pid = os.getpid()
                self.directory = directory
                self.spool = Spool(
                    directory=directory, max_bytes=settings.OPENJEV.spool_max_bytes, encode=record_encode
                )
                self.drainer = Drainer(spool=self.spool, write=frames_write, tally_write=tally_write)
                self.spool.on_synced = self.drainer.wake
            return self.spool, self.drainer

    def drain(self, *, timeout: float) -> bool:
        return self.drainer is None or self._pid != os.getpid() or self.drainer.drain(timeout=timeout)

    def stop(self, *, timeout: float) -> bool:
        """Write what is spooled, end both threads; what the database did not take stays for the next process."""
        with self._lock:
            spool, drainer, self.spool, self.drainer = self.spool, self.drainer, None, None
            if spool is None or drainer is None or self._pid != os.getpid():
                return True
        spool_stopped = spool.stop(timeout=timeout)
        drainer_stopped = drainer.stop(timeout=timeout)
        spool.close()
        if spool_stopped and drainer_stopped:
            spool.files.remove()
            (spool.directory / f"{spool.owner}.lock").unlink(missing_ok=True)
        return spool_stopped and drainer_stopped


pipeline = Pipeline()
stage_register(pipeline)


def spool_directory() -> Path:
    """`OPENJEV_SPOOL_DIR`, one folder per database (a spool is written out only into the database it was meant
    for: the tests' database is not the service's)."""
    db = connection.settings_dict
    identity = f"{connection.vendor}|{db.get('HOST')}|{db.get('PORT')}|{db.get('NAME')}"
    return settings.OPENJEV.spool_dir / hashlib.sha256(identity.encode()).hexdigest()[:16]


def storage_start() -> None:
    """Start this process's spool and drainer now rather than at its first evaluation, so what a killed process
    left in the spool folder (an orphan) is written out as soon as the service runs again, with traffic or
    without. A failure is logged; the first evaluation tries again."""
    try:
        pipeline.started()
    except Exception:
        log.exception("could not start the evaluation spool; the first evaluation tries again")


def evaluation_store(*, record: StoredEvaluation) -> concurrent.futures.Future[bool] | None:
    """Spool one evaluation (at level `off`, an answered one's usage is tallied in memory instead); a batch worker
    collecting its lines' records keeps them instead (`audit.storage.collect`). The future resolves True once it is
    on disk, or fails with `SpoolFull`; None: nothing to wait for. Never raises."""
    if record_collected(record=record):
        return None
    try:
        spool, drainer = pipeline.started()
        if record.level == "off":
            if record.outcome is not None:
                drainer.tally.add(record=record)
            return None
        return spool.append(record)
    except Exception as exc:
        log.exception("could not spool evaluation %s", record.request_id)
        future: concurrent.futures.Future[bool] = concurrent.futures.Future()
        future.set_exception(SpoolFull(str(exc)))
        return future


def unstored_counted() -> None:
    """An answer that went out without its evaluation on disk (`OPENJEV_SPOOL_FULL=answer`, or a spool that
    could not be written): counted, so an operator sees what the audit misses."""
    pipeline.refused += 1
    metrics.storage_writes_total.labels("evaluations", "unstored").inc()


def spool_full() -> bool:
    """Whether the spool holds its maximum now (new evaluations are refused under `OPENJEV_SPOOL_FULL=refuse`)."""
    spool = pipeline.spool
    return spool is not None and spool.full


def storage_stats() -> dict[str, float]:
    """Counters since the process started: stored, failed, pending, replayed, batches, writer CPU; the spool."""
    spool, drainer = pipeline.spool, pipeline.drainer
    stats = drainer.stats if drainer is not None else None
    return {
        "submitted": spool.appended if spool else 0,
        "dropped": pipeline.refused,
        "stored": stats.written if stats else 0,
        "failed": stats.failed if stats else 0,
        "replayed": stats.replayed if stats else 0,
        "pending": spool.pending_frames if spool else 0,
        "spool_bytes": spool.pending_bytes if spool else 0,
        "batches": stats.batches if stats else 0,
        "writer_cpu_s": stats.cpu_s if stats else 0.0,
    }

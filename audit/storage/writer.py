"""One writer thread for what the API stores that may be lost (API keys' last use): a bounded queue, batches,
never a raise.

The event loop only puts a small job on a queue (microseconds); the writer thread takes what has
queued up, lingers briefly so a burst becomes one batch, and hands each sink its jobs, one transaction
per batch. Nothing here raises into the caller: a full queue, a failing sink or a database outage is
logged and counted (`writer_stats`). While the database is down a sink's write is given up without a
connection attempt, except one per back-off step (`writes_tried`, the process's one outage state: one warning
per outage). Evaluations, which may not be lost, go through the spool on disk (`audit.storage.store`), a stage
of its own that `writer_drain` and `writer_stop` wait for first. The writer closes its connection when idle, so
it never pins one.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.db import InterfaceError, OperationalError, ProgrammingError, connections

from audit.database import database_outage, database_thread_bounded
from serving import metrics

log = logging.getLogger(__name__)

QUEUE_SIZE = 10_000
BATCH_MAX = 200
LINGER_SECONDS = 0.05
IDLE_CLOSE_SECONDS = 2.0


class Sink[J](Protocol):
    """Where one kind of job goes. `write` runs on the writer thread with every job of the batch."""

    name: str

    def write(self, jobs: list[J]) -> int:
        """Write the jobs; how many were written (the rest failed and were logged). May raise: then
        every job of the batch counts as failed."""
        ...


@dataclass
class SinkStats:
    submitted: int = 0
    written: int = 0
    failed: int = 0
    dropped: int = 0


@dataclass
class WriterStats:
    batches: int = 0
    cpu_s: float = 0.0
    sinks: dict[str, SinkStats] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, *, sink: str | None = None, **deltas: float) -> None:
        with self.lock:
            target: Any = self if sink is None else self.sinks.setdefault(sink, SinkStats())
            for name, delta in deltas.items():
                setattr(target, name, getattr(target, name) + delta)

    def of(self, sink: str) -> SinkStats:
        with self.lock:
            found = self.sinks.get(sink, SinkStats())
            return SinkStats(found.submitted, found.written, found.failed, found.dropped)


class _Shutdown:
    """Sentinel: finish what is queued, close the connection, end the thread."""


@dataclass(frozen=True)
class _Job:
    sink: Sink[Any]
    payload: Any


class BatchWriter:
    """The one thread that writes; started on first use, restarted after a fork or a stop."""

    def __init__(self, *, name: str = "openjev-storage", queue_size: int = QUEUE_SIZE) -> None:
        self.name = name
        self.queue_size = queue_size
        self.stats = WriterStats()
        self._queue: queue.Queue[_Job | _Shutdown] = queue.Queue(queue_size)
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._start_lock = threading.Lock()
        self._pending = 0
        self._idle = threading.Condition()
        self._last_drop_log = 0.0

    # -- producer side (event loop) ---------------------------------------------------------------

    def submit[J](self, *, sink: Sink[J], job: J) -> bool:
        """Queue `job` for `sink`; False (counted, logged at most every 10 s) when the queue is full."""
        self._ensure_started()
        with self._idle:
            self._pending += 1
        try:
            self._queue.put_nowait(_Job(sink, job))
        except queue.Full:
            with self._idle:
                self._pending -= 1
                self._idle.notify_all()
            self.stats.add(sink=sink.name, dropped=1)
            metrics.storage_writes_total.labels(sink.name, "dropped").inc()
            now = time.monotonic()
            if now - self._last_drop_log > 10:
                self._last_drop_log = now
                log.error(
                    "storage queue is full (%d jobs): dropping; the database is too slow or down", self.queue_size
                )
            return False
        self.stats.add(sink=sink.name, submitted=1)
        return True

    @property
    def pending(self) -> int:
        return self._pending

    def _ensure_started(self) -> None:
        thread = self._thread
        if thread is not None and thread.is_alive() and self._pid == os.getpid():
            return
        with self._start_lock:
            if self._thread is not None and self._thread.is_alive() and self._pid == os.getpid():
                return
            if self._pid != os.getpid():  # a forked child inherits a queue without its thread
                self._queue = queue.Queue(self.queue_size)
                self._pending = 0
            self._pid = os.getpid()
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def drain(self, *, timeout: float) -> bool:
        """Wait until every submitted job is written (or failed); False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout=timeout)

    def stop(self, *, timeout: float) -> bool:
        """Write what is queued, close the connection and end the thread (tests, bench, process exit)."""
        thread = self._thread
        if thread is None or not thread.is_alive():
            return True
        try:
            self._queue.put(_Shutdown(), timeout=timeout)
        except queue.Full:
            return False
        thread.join(timeout)
        if thread.is_alive():
            return False
        if self._pending:  # submitted while the old thread was stopping
            self._ensure_started()
        return True

    # -- consumer side (writer thread) ------------------------------------------------------------

    def _run(self) -> None:
        database_thread_bounded()
        while True:
            try:
                first = self._queue.get(timeout=IDLE_CLOSE_SECONDS)
            except queue.Empty:
                connections.close_all()
                continue
            batch = [first]
            if not isinstance(first, _Shutdown) and self._queue.qsize() < BATCH_MAX - 1:
                # Linger briefly (not when a full batch is already waiting): one transaction for a burst
                # costs far less than one per row. Asleep, not waiting on the queue, so the jobs arriving
                # meanwhile do not each wake this thread (and take the GIL from the event loop) only to
                # be appended.
                time.sleep(LINGER_SECONDS)
            while len(batch) < BATCH_MAX and not isinstance(batch[-1], _Shutdown):
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            jobs = [j for j in batch if isinstance(j, _Job)]
            metrics.storage_queue_depth.set(self._queue.qsize())
            started, began = time.thread_time(), time.perf_counter()
            try:
                self._batch_write(jobs)
            finally:
                metrics.storage_batch_duration.observe(time.perf_counter() - began)
                self.stats.add(cpu_s=time.thread_time() - started, batches=1)
                with self._idle:
                    self._pending -= len(jobs)
                    self._idle.notify_all()
            if isinstance(batch[-1], _Shutdown):
                connections.close_all()
                return

    def _batch_write(self, jobs: list[_Job]) -> None:
        """Each sink gets its jobs in queue order; one failing sink never loses another's jobs."""
        by_sink: dict[str, tuple[Sink[Any], list[Any]]] = {}
        for job in jobs:
            by_sink.setdefault(job.sink.name, (job.sink, []))[1].append(job.payload)
        for name, (sink, payloads) in by_sink.items():
            try:
                written = sink.write(payloads)
            except BaseException:  # never let the thread die with jobs counted as pending
                log.exception("storage writer: the %s sink failed", name)
                written = 0
                connections.close_all()
            self.stats.add(sink=name, written=written, failed=len(payloads) - written)
            metrics.storage_writes_total.labels(name, "written").inc(written)
            if written < len(payloads):
                metrics.storage_writes_total.labels(name, "failed").inc(len(payloads) - written)


def schema_missing(exc: BaseException) -> bool:
    """Not migrated: PostgreSQL says ProgrammingError, SQLite an OperationalError "no such table"."""
    return isinstance(exc, ProgrammingError) or "no such table" in str(exc)


def writes_tried(write: Callable[[], None], *, what: str) -> bool:
    """Make the write unless the database is down with no attempt due (the process's back-off, shared with its
    other users of the database): True once written, False when given up (the outage is logged once, by
    `database_outage`). Other errors go straight to the caller."""
    if not database_outage.attempt_claimed(by=what):
        return False
    try:
        write()
    except (OperationalError, InterfaceError) as exc:
        connections.close_all()
        if schema_missing(exc):
            raise
        database_outage.failed(error=exc, consequence=f"{what} are given up while it is down", by=what)
        return False
    database_outage.recovered(by=what)
    return True


writer = BatchWriter()
"""The process's one writer."""


class Stage(Protocol):
    """Storage that runs before this writer (the evaluations' spool and its drainer)."""

    def drain(self, *, timeout: float) -> bool: ...

    def stop(self, *, timeout: float) -> bool: ...


_stages: list[Stage] = []


def stage_register(stage: Stage) -> None:
    """`writer_drain` and `writer_stop` wait for `stage` first."""
    _stages.append(stage)


def writer_drain(*, timeout: float = 30.0) -> bool:
    """Block until everything stored so far is written or has failed (tests, bench, shutdown)."""
    deadline = time.monotonic() + timeout
    drained = all([stage.drain(timeout=max(0.0, deadline - time.monotonic())) for stage in _stages])
    return writer.drain(timeout=max(0.0, deadline - time.monotonic())) and drained


def writer_stop(*, timeout: float = 30.0) -> bool:
    """Drain, close the database connections and end the threads; the next write restarts them. What the
    database did not take within `timeout` stays in the spool for the next process."""
    deadline = time.monotonic() + timeout
    stopped = all([stage.stop(timeout=max(0.1, deadline - time.monotonic())) for stage in _stages])
    return writer.stop(timeout=max(0.1, deadline - time.monotonic())) and stopped


atexit.register(writer_stop, timeout=5.0)

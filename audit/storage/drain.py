"""The spool's drainer: one thread per process writing the spooled evaluations into the database, in order.

It writes the dead processes' spools it can claim first (oldest first: a SIGKILLed worker's answered evaluations),
then its own process's, batch by batch; a batch is acknowledged in the spool only once the database committed it.
While the database cannot be reached the same batch is tried again once per back-off step of the process's
database outage (`audit.database`: shared with the caches' refresh thread, so the process makes one connection
attempt per step and logs one warning per outage, and one line with the count when it ends), for as long as it
takes: the spool, not memory, holds what waits. A batch tried again after a failure may have been committed before
its acknowledgement was lost, so it is written without the rows the database already holds (`dedupe`).

It also writes the key usage tallied in memory at storage level `off` (`audit.storage.usage.UsageTally`), once it
is due, at the same back-off steps while the database is out.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.db import connections

from audit.database import database_outage, database_thread_bounded
from audit.storage.spool import Spool
from audit.storage.spool_files import HEADER, Frame, SpoolFiles, orphan_release, orphans_claim
from audit.storage.usage import TALLY_SECONDS, Totals, UsageTally
from serving import metrics

log = logging.getLogger(__name__)

BATCH_MAX = 200
LINGER_SECONDS = 0.02
"""After a quiet moment, wait this long for more records: one transaction for a burst costs far less."""
IDLE_CLOSE_SECONDS = 2.0
ORPHAN_SCAN_SECONDS = 10.0
USER = "spool"
"""How the drainer names itself to the database's outage (`serving.outage`)."""
STEP_WAIT_MAX = 1.0
"""The longest sleep between looks at the outage (another thread's success ends it sooner)."""


class StorageUnavailable(Exception):
    """The database cannot take the batch now (unreachable, locked, not migrated, not this spool's): try it again
    later."""


Write = Callable[[list[bytes], bool], int]
"""Write these payloads (`dedupe`: skip rows already stored); how many were stored (the others could never be, and
were logged). Raises `StorageUnavailable` to have the batch tried again."""
TallyWrite = Callable[[Totals], None]
"""Add tallied key usage to the database; raises `StorageUnavailable` to have it kept and tried again."""


@dataclass
class DrainStats:
    batches: int = 0
    written: int = 0
    failed: int = 0
    replayed: int = 0
    cpu_s: float = 0.0


class Drainer:
    """Started with the spool; `stop` writes out what is spooled (within its timeout) and ends the thread."""

    def __init__(self, *, spool: Spool, write: Write, tally_write: TallyWrite) -> None:
        self.spool = spool
        self._write = write
        self._tally_write = tally_write
        self.tally = UsageTally()
        self.stats = DrainStats()
        self.outage = database_outage
        self._stop = threading.Event()
        self._idle = threading.Condition()
        self._last_scan = 0.0
        self._thread = threading.Thread(target=self._run, name="openjev-spool-drain", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        with self._idle:
            self._idle.notify_all()

    def drain(self, *, timeout: float) -> bool:
        """Wait until everything synced to the spool so far, and the usage tallied, is in the database."""
        self.tally.asked = True
        self.wake()
        with self._idle:
            return self._idle.wait_for(lambda: self.spool.drained and not self.tally.pending, timeout=timeout)

    def stop(self, *, timeout: float) -> bool:
        drained = self.drain(timeout=timeout)
        self._stop.set()
        self.wake()
        self._thread.join(timeout if drained else 1.0)
        return drained and not self._thread.is_alive()

    def _run(self) -> None:
        database_thread_bounded()
        while not self._stop.is_set():
            if time.monotonic() - self._last_scan > ORPHAN_SCAN_SECONDS:
                self._last_scan = time.monotonic()
                try:
                    self._orphans_write()
                except Exception:  # a dead process's spool must not stop this one's: it stays for the next scan
                    log.exception("could not write the spool a process left; trying again later")
            self._tally_written()
            frames = self.spool.files.frames_read(limit=BATCH_MAX, until=self.spool.synced)
            if not frames:
                metrics.spool_oldest_timestamp.set(float("inf"))
                self._idle_wait()
                continue
            if len(frames) < BATCH_MAX:
                time.sleep(LINGER_SECONDS)
                frames += self.spool.files.frames_read(limit=BATCH_MAX - len(frames), until=self.spool.synced)
            if not self._frames_write(frames, dedupe=False):
                self.spool.files.rewind()
                return
            self.spool.acknowledged(frames[-1].end, released=_frames_bytes(frames), frames=len(frames))
            self.wake()
        self.tally.asked = True
        self._tally_written()
        if self.tally.pending:
            log.warning("the key usage tallied at storage level off is lost: the database did not take it at stop")
        connections.close_all()

    def _idle_wait(self) -> None:
        with self._idle:
            self._idle.notify_all()
            woken = self._idle.wait(timeout=TALLY_SECONDS if self.tally.pending else IDLE_CLOSE_SECONDS)
        if not woken and not self.tally.pending:
            connections.close_all()

    def _tally_written(self) -> None:
        """The tallied key usage written once due, when the database's outage allows an attempt; kept on failure."""
        if not self.tally.due() or not self.outage.attempt_claimed(by=USER):
            return
        totals = self.tally.taken()
        self.tally.asked = False
        evaluations = sum(counts[0] for counts in totals.values())
        began = time.perf_counter()
        try:
            self._tally_write(totals)
        except StorageUnavailable as exc:
            self.tally.returned(totals)
            connections.close_all()
            self.outage.failed(error=exc.__cause__ or exc, consequence="key usage waits in memory", by=USER)
            return
        except Exception:  # a fault no retry mends (a bug): logged, the counts dropped
            log.exception("could not store the key usage tallied at storage level off; it is dropped")
            connections.close_all()
            metrics.storage_writes_total.labels("key_usage", "failed").inc(evaluations)
        else:
            metrics.storage_writes_total.labels("key_usage", "written").inc(evaluations)
        finally:
            metrics.storage_batch_duration.observe(time.perf_counter() - began)
        self._recovered()
        self.wake()

    def _recovered(self) -> None:
        """The database took a write: the outage, if any, ends with its one closing line."""
        self.outage.recovered(
            summary=f"{self.spool.pending_frames} evaluation(s) wait in this process's spool", by=USER
        )

    def _orphans_write(self) -> None:
        """Every dead process's spool this process can claim, written out and removed, oldest first."""
        for files, fd in orphans_claim(directory=self.spool.directory, exclude={self.spool.owner}):
            if self._orphan_write(files):
                orphan_release(files=files, fd=fd)
            else:  # stopping mid-outage: another process takes it over later
                os.close(fd)
                return

    def _orphan_write(self, files: SpoolFiles) -> bool:
        count = 0
        while frames := files.frames_read(limit=BATCH_MAX, until=None):
            if not self._frames_write(frames, dedupe=True):
                return False
            files.ack(frames[-1].end)
            count += len(frames)
        if count:
            self.stats.replayed += count
            log.warning("wrote %d evaluation(s) left in the spool of a process that ended (%s)", count, files.owner)
        return True

    def _attempt_waited(self) -> bool:
        """Wait for this thread's turn at the database: now while it answers, else the next back-off step no
        other thread of the process took (its success ends the outage for all). False when told to stop."""
        while not self.outage.attempt_claimed(by=USER):
            if self._stop.wait(min(STEP_WAIT_MAX, max(0.01, self.outage.next_attempt_in))):
                return False
        return True

    def _frames_write(self, frames: list[Frame], *, dedupe: bool) -> bool:
        """Write the batch, trying again at each back-off step until it is in; False when told to stop."""
        metrics.spool_oldest_timestamp.set(frames[0].appended_at)
        while True:
            if not self._attempt_waited():
                return False
            started, began = time.thread_time(), time.perf_counter()
            try:
                written = self._write([f.payload for f in frames], dedupe)
            except StorageUnavailable as exc:
                connections.close_all()
                self.outage.failed(error=exc.__cause__ or exc, consequence="answers wait in the spool on disk", by=USER)
                dedupe = True
                continue
            except Exception:  # a fault no retry mends (a bug): counted, logged, skipped
                log.exception("could not store %d spooled evaluation(s); they are skipped", len(frames))
                connections.close_all()
                written = 0
            finally:
                metrics.storage_batch_duration.observe(time.perf_counter() - began)
                self.stats.cpu_s += time.thread_time() - started
            self.stats.batches += 1
            self.stats.written += written
            self.stats.failed += len(frames) - written
            metrics.storage_writes_total.labels("evaluations", "written").inc(written)
            if written < len(frames):
                metrics.storage_writes_total.labels("evaluations", "failed").inc(len(frames) - written)
            self._recovered()
            return True


def _frames_bytes(frames: list[Frame]) -> int:
    return sum(HEADER.size + len(f.payload) for f in frames)

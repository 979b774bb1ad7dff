"""A local append-only spool on disk: what makes an answered evaluation durable before its answer leaves.

The request path hands each record to `Spool.append` and awaits the future it returns; one thread takes every
record that arrived meanwhile, encodes them, writes them with one `write` and one `fdatasync` (group commit: at
100 evaluations/s most requests share a sync with others, and a sync on local disk is a fraction of a
millisecond) and resolves their futures. The database is written from the spool afterwards (`audit.storage.drain`),
in order, and each committed batch moves the spool's acknowledged position, so an outage of any length loses
nothing while the spool has room, and a SIGKILL loses nothing that was answered: the next process on this
database claims the dead one's files and writes them first.

A waiter that gave up (its client gone, its wait timed out) still has its record written; only its future is left
alone. A write that fails (a full or failing disk) fails its batch's futures, is cut off the segment and the spool
goes on in a new segment, so a half-written batch never hides the frames after it. A forked child closes its
copies of the parent's descriptors (the lock above all: held by a child, it would keep a dead parent's spool from
being claimed) and starts a spool of its own on first use (`audit.storage.store`).

The files and their frames: `audit.storage.spool_files`. No Django.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
import threading
import time
import weakref
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audit.storage.spool_files import HEADER, Position, SpoolFiles, directory_synced, owner_lock
from serving import metrics

log = logging.getLogger(__name__)

SEGMENT_BYTES = 16 * 1024 * 1024
"""A segment is rotated past this size; fully acknowledged segments are deleted."""


class SpoolFull(Exception):
    """The spool holds its maximum: the record is not durable (the caller's policy decides what to answer)."""


@dataclass
class _Waiting:
    item: Any
    future: concurrent.futures.Future[bool]


_live: weakref.WeakSet[Spool] = weakref.WeakSet()


def _forked() -> None:
    """In a forked child: the parent's spools are the parent's; close the child's copies of their descriptors."""
    for spool in list(_live):
        spool.forked()


os.register_at_fork(after_in_child=_forked)


class Spool:
    """This process's spool: the group-committing append thread and the files it writes."""

    def __init__(self, *, directory: Path, max_bytes: int, encode: Callable[[Any], bytes | None]) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.max_bytes = max_bytes
        self._encode = encode
        self.owner, self._lock_fd = owner_lock(directory=directory)
        self.files = SpoolFiles(directory=directory, owner=self.owner)
        self._segment, self._size = 0, 0
        self._fd = self._segment_open(0)
        self.synced = Position(0, 0)
        self.pending_bytes = 0
        self.pending_frames = 0
        self.appended = 0
        self.on_synced: Callable[[], None] = lambda: None
        self._committing = False
        self._waiting: list[_Waiting] = []
        self._cond = threading.Condition()
        self._stopping = False
        self._closed = False
        _live.add(self)
        self._thread = threading.Thread(target=self._run, name="openjev-spool", daemon=True)
        self._thread.start()

    def append(self, item: Any) -> concurrent.futures.Future[bool]:
        """A future resolved True once `item` is on disk (False: it encodes to nothing to store), or failed
        with `SpoolFull`. Cheap: the encoding and the write happen on the spool's thread."""
        future: concurrent.futures.Future[bool] = concurrent.futures.Future()
        with self._cond:
            if self._stopping:
                future.set_exception(SpoolFull("the spool is stopped"))
                return future
            self._waiting.append(_Waiting(item, future))
            self._cond.notify()
        return future

    @property
    def full(self) -> bool:
        return self.pending_bytes >= self.max_bytes

    @property
    def drained(self) -> bool:
        """Nothing waits to be synced or written."""
        with self._cond:
            return not self._waiting and not self._committing and self.pending_frames == 0

    def acknowledged(self, position: Position, *, released: int, frames: int) -> None:
        """The drainer wrote everything before `position` (`frames` frames, `released` bytes)."""
        with self._cond:
            self.pending_bytes -= released
            self.pending_frames -= frames
            self.files.ack(position, keep=self._segment)
            self._published()

    def stop(self, *, timeout: float) -> bool:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def close(self) -> None:
        """Give up the lock: what is left is an orphan the next process writes out."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            os.close(self._fd)
            os.close(self._lock_fd)

    def forked(self) -> None:
        """In a forked child (no thread runs here): close the copies, touch nothing the parent writes."""
        if not self._closed:
            self._closed = True
            os.close(self._fd)
            os.close(self._lock_fd)

    def _segment_open(self, segment: int) -> int:
        fd = os.open(self.files.segment_path(segment), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        directory_synced(directory=self.directory)
        return fd

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._waiting or self._stopping)
                batch, self._waiting = self._waiting, []
                if not batch and self._stopping:
                    return
                self._committing = True
            try:
                self._batch_commit(batch)
            except Exception:  # never let the thread die with waiters behind it
                log.exception("the storage spool failed a batch")
                for waiting in batch:
                    if not waiting.future.done():
                        waiting.future.set_exception(SpoolFull("the spool failed"))
            finally:
                with self._cond:
                    self._committing = False
                self.on_synced()

    def _batch_commit(self, batch: list[_Waiting]) -> None:
        """Encode, write and sync the batch at once; then answer every waiter that still waits."""
        frames, durable, count, now = bytearray(), [], 0, time.time()
        for waiting in batch:
            # A waiter that was cancelled (its client left) is not answered, but its record is still written.
            waits = waiting.future.set_running_or_notify_cancel()
            try:
                payload = self._encode(waiting.item)
            except Exception:
                log.exception("could not encode an evaluation for the spool")
                payload = None
            if payload is None:
                if waits:
                    waiting.future.set_result(False)
                continue
            if self.pending_bytes + len(frames) + HEADER.size + len(payload) > self.max_bytes:
                if waits:
                    waiting.future.set_exception(SpoolFull(f"the spool holds its maximum ({self.max_bytes} bytes)"))
                continue
            frames += HEADER.pack(len(payload), zlib.crc32(payload), now) + payload
            count += 1
            if waits:
                durable.append(waiting.future)
        if frames:
            try:
                self._write(bytes(frames), count=count)
            except OSError as exc:
                log.exception("could not write the storage spool")
                self._segment_abandoned()
                for future in durable:
                    future.set_exception(SpoolFull(f"the spool cannot be written: {exc.strerror}"))
                return
        for future in durable:
            future.set_result(True)

    def _write(self, frames: bytes, *, count: int) -> None:
        if self._size and self._size + len(frames) > SEGMENT_BYTES:
            self._segment_next()
        view = memoryview(frames)
        while view:
            view = view[os.write(self._fd, view) :]
        os.fdatasync(self._fd)
        with self._cond:
            self._size += len(frames)
            self.pending_bytes += len(frames)
            self.pending_frames += count
            self.appended += count
            self.synced = Position(self._segment, self._size)
            self._published()

    def _segment_next(self) -> None:
        fd = self._segment_open(self._segment + 1)
        os.close(self._fd)
        self._fd, self._segment, self._size = fd, self._segment + 1, 0

    def _segment_abandoned(self) -> None:
        """After a failed write: cut what it left (a partial frame) and go on in a new segment, so the frames
        written after it are never behind a torn one."""
        with contextlib.suppress(OSError):  # the new segment is enough: a torn frame ends only its own segment
            os.ftruncate(self._fd, self._size)
        try:
            self._segment_next()
        except OSError:
            log.exception("could not start a new spool segment")

    def _published(self) -> None:
        metrics.spool_evaluations.set(self.pending_frames)
        metrics.spool_bytes.set(self.pending_bytes)

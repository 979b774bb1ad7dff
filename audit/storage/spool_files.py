"""One owner's spool files on disk: the frames' format, reading them back from the acknowledged position, and
claiming a dead process's files (`audit.storage.spool` writes them).

Files, per process (an "owner"): `<owner>.lock`, held with `flock` while the owner lives (a lock that can be taken
belongs to a dead process: its files are an orphan; a forked child closes its copy, `audit.storage.spool`),
`<owner>.<n>.seg` segments of frames, and `<owner>.ack`, the position written so far, replaced whole (written
aside, then renamed over the old one), so a kill never leaves half a position. It is replaced at most every
`ACK_SECONDS` (and whenever the position enters another segment): a kill replays what was written since, whose rows
the replay skips by request id (`dedupe`), for a file write and a rename less per batch. A frame is a 16-byte header
(payload length, CRC-32, the time it was appended) and the payload; a torn frame (a kill during a write, before
its sync answered anyone; zeros a crash left) ends what is read of its segment, and reading goes on in the next
one (a write that failed is cut off and the spool moves to a new segment). No Django.
"""

from __future__ import annotations

import fcntl
import os
import struct
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

HEADER = struct.Struct("<IId")
"""Payload length, CRC-32 of the payload, append time (seconds since the epoch)."""
FRAME_MAX = 256 * 1024 * 1024
"""No payload is longer: a header claiming more is torn, not a frame."""
ACK_SECONDS = 0.25
"""The acknowledged position on disk is at most this old (see the module)."""


@dataclass(frozen=True)
class Position:
    """Where a reader is: segment number and byte offset in it."""

    segment: int
    offset: int


@dataclass(frozen=True)
class Frame:
    payload: bytes
    appended_at: float
    end: Position
    """The position just after this frame: acknowledging it acknowledges everything before."""


class SpoolFiles:
    """One owner's files, read from its acknowledged position: this process's own, or a dead one's claimed."""

    def __init__(self, *, directory: Path, owner: str) -> None:
        self.directory = directory
        self.owner = owner
        self.acked = self._ack_read()
        self._read = self.acked
        self._ack_written = 0.0

    def segment_path(self, segment: int) -> Path:
        return self.directory / f"{self.owner}.{segment:06d}.seg"

    @property
    def ack_path(self) -> Path:
        return self.directory / f"{self.owner}.ack"

    def _ack_read(self) -> Position:
        try:
            segment, offset = self.ack_path.read_text().split()
            return Position(int(segment), int(offset))
        except (OSError, ValueError):
            segments = self.segments()
            return Position(segments[0] if segments else 0, 0)

    def segments(self) -> list[int]:
        found = (p.name.removeprefix(f"{self.owner}.").removesuffix(".seg") for p in self._segment_paths())
        return sorted(int(n) for n in found if n.isdigit())

    def _segment_paths(self) -> list[Path]:
        return list(self.directory.glob(f"{self.owner}.*.seg"))

    def frames_read(self, *, limit: int, until: Position | None) -> list[Frame]:
        """Up to `limit` frames after those already read (not past `until`, what is known synced), in order."""
        frames: list[Frame] = []
        while len(frames) < limit:
            found = self._frames_in(self._read, limit=limit - len(frames), until=until)
            frames += found
            if found:
                self._read = found[-1].end
                continue
            later = [s for s in self.segments() if s > self._read.segment]
            if not later or (until is not None and self._read.segment >= until.segment):
                return frames
            self._read = Position(later[0], 0)
        return frames

    def _frames_in(self, start: Position, *, limit: int, until: Position | None) -> list[Frame]:
        stop = until.offset if until is not None and until.segment == start.segment else None
        frames: list[Frame] = []
        try:
            with self.segment_path(start.segment).open("rb") as file:
                file.seek(start.offset)
                at = start.offset
                while len(frames) < limit and (stop is None or at < stop):
                    header = file.read(HEADER.size)
                    if len(header) < HEADER.size:
                        break
                    length, crc, appended_at = HEADER.unpack(header)
                    if not 0 < length <= FRAME_MAX:
                        break  # zeros or garbage: what a crash left past the last synced frame
                    payload = file.read(length)
                    if len(payload) < length or zlib.crc32(payload) != crc:
                        break  # a torn tail: never synced, so never answered
                    at += HEADER.size + length
                    frames.append(Frame(payload, appended_at, Position(start.segment, at)))
        except FileNotFoundError:
            pass
        return frames

    def rewind(self) -> None:
        """Read again from the acknowledged position (a batch that could not be written)."""
        self._read = self.acked

    def ack(self, position: Position, *, keep: int | None = None) -> None:
        """Everything before `position` is in the database; segments wholly before it are deleted (not `keep`,
        the one being appended to)."""
        crossed = position.segment != self.acked.segment
        self.acked = position
        if not crossed and time.monotonic() - self._ack_written < ACK_SECONDS:
            return
        self._ack_written = time.monotonic()
        aside = self.directory / f".{self.owner}.ack"
        aside.write_text(f"{position.segment} {position.offset}")
        aside.replace(self.ack_path)  # atomic: a reader finds the old position or the new one, never half of one
        if crossed:
            for segment in self.segments():
                if segment < position.segment and segment != keep:
                    self.segment_path(segment).unlink(missing_ok=True)

    def remove(self) -> None:
        """Delete every file of this owner (an orphan written out)."""
        for path in self._segment_paths():
            path.unlink(missing_ok=True)
        self.ack_path.unlink(missing_ok=True)
        (self.directory / f".{self.owner}.ack").unlink(missing_ok=True)


def owner_lock(*, directory: Path) -> tuple[str, int]:
    """A new owner name and its lock, taken before the name is visible (no one can claim it in between)."""
    owner = f"{time.time_ns():020d}-{os.getpid()}"
    temporary = directory / f".{owner}.lock"
    fd = os.open(temporary, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    temporary.rename(directory / f"{owner}.lock")
    directory_synced(directory=directory)
    return owner, fd


def directory_synced(*, directory: Path) -> None:
    """Make the folder's entries durable (a new file's name survives a power loss only once its folder is synced:
    `fdatasync` of the file alone does not promise it)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def orphans_claim(*, directory: Path, exclude: set[str]) -> list[tuple[SpoolFiles, int]]:
    """Every dead owner's files (oldest first) with its lock, now held by this process."""
    claimed = []
    for lock in sorted(directory.glob("*.lock")):
        owner = lock.name.removesuffix(".lock")
        if owner.startswith(".") or owner in exclude:
            continue
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        if not lock.exists():  # written out and removed by another claimant meanwhile
            os.close(fd)
            continue
        claimed.append((SpoolFiles(directory=directory, owner=owner), fd))
    return claimed


def orphan_release(*, files: SpoolFiles, fd: int) -> None:
    """A claimed orphan written out: its files removed, then its lock."""
    files.remove()
    (files.directory / f"{files.owner}.lock").unlink(missing_ok=True)
    os.close(fd)

"""Uploaded batch input files: read once as they are stored, line by line, in bounded memory.

What a file must be is checked while it is stored, so a client learns at once (a 400 naming the line) rather than
when its batch fails: UTF-8 text without NUL bytes (a binary file is refused), at most `max_lines` lines of at
most `max_line_bytes` each. Lines are written in groups, each in its own short transaction, so a 200 MB upload
never holds the database's write lock for long; the file becomes visible (`complete`) only once all of it is
stored, and a refused or broken upload leaves nothing behind.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import IO

from django.db import transaction

from batches.models import BatchFile, FileLine

READ_BYTES = 1 << 20
LINES_PER_WRITE = 500


class FileRefused(Exception):
    """The upload is not a batch input file this service takes; the message says why and where."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class FileLimits:
    max_lines: int
    max_line_bytes: int


def file_id_new() -> str:
    return f"file-{uuid.uuid4().hex[:24]}"


def lines_read(*, source: IO[bytes], max_line_bytes: int) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes without the line break) for every line that is not blank; a line longer than
    `max_line_bytes` is refused as soon as that much of it has been read, so memory stays bounded."""
    number, pending = 0, b""
    while chunk := source.read(READ_BYTES):
        pending += chunk
        *whole, pending = pending.split(b"\n")
        for raw in whole:
            number += 1
            if raw.strip():
                yield number, _line_checked(raw=raw, number=number, max_line_bytes=max_line_bytes)
        if len(pending) > max_line_bytes:
            raise _line_too_long(number=number + 1, max_line_bytes=max_line_bytes)
    if pending.strip():
        yield number + 1, _line_checked(raw=pending, number=number + 1, max_line_bytes=max_line_bytes)


def _line_checked(*, raw: bytes, number: int, max_line_bytes: int) -> bytes:
    raw = raw.removesuffix(b"\r")
    if len(raw) > max_line_bytes:
        raise _line_too_long(number=number, max_line_bytes=max_line_bytes)
    return raw


def _line_too_long(*, number: int, max_line_bytes: int) -> FileRefused:
    return FileRefused("line_too_long", f"line {number} is over {max_line_bytes} bytes, the most a line may have")


def line_text(*, raw: bytes, number: int) -> str:
    """A line as text: UTF-8 without NUL bytes, or the file is refused as not a text file."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise FileRefused("invalid_file", f"line {number} is not UTF-8 text: a batch file is JSONL") from None
    if "\x00" in text:
        raise FileRefused("invalid_file", f"line {number} holds a NUL byte: a batch file is JSONL text")
    return text


def file_store(
    *, source: IO[bytes], filename: str, owner: str, purpose: str, limits: FileLimits, expires_at: datetime | None
) -> BatchFile:
    """Store an upload (see the module); FileRefused, with nothing stored, when it is not one this service takes."""
    stored = BatchFile.objects.create(
        id=file_id_new(), owner=owner, purpose=purpose, filename=filename[:255], expires_at=expires_at
    )
    try:
        count, longest, size = _lines_store(file=stored, source=source, limits=limits)
    except BaseException:
        BatchFile.objects.filter(pk=stored.pk).delete()
        raise
    BatchFile.objects.filter(pk=stored.pk).update(bytes=size, line_count=count, longest_line=longest, complete=True)
    stored.refresh_from_db()
    return stored


def _lines_store(*, file: BatchFile, source: IO[bytes], limits: FileLimits) -> tuple[int, int, int]:
    """Write the lines in groups; (lines, longest line's bytes, bytes of the file)."""
    group: list[FileLine] = []
    count = longest = 0
    for number, raw in lines_read(source=source, max_line_bytes=limits.max_line_bytes):
        count += 1
        if count > limits.max_lines:
            raise FileRefused("too_many_lines", f"the file has over {limits.max_lines} lines, the most a batch takes")
        longest = max(longest, len(raw))
        group.append(FileLine(file=file, number=number, text=line_text(raw=raw, number=number)))
        if len(group) >= LINES_PER_WRITE:
            _group_write(group)
            group = []
    _group_write(group)
    if count == 0:
        raise FileRefused("empty_file", "the file holds no line: a batch file has one JSON request per line")
    return count, longest, source.tell() if source.seekable() else 0


def _group_write(group: list[FileLine]) -> None:
    if group:
        with transaction.atomic():
            FileLine.objects.bulk_create(group)


def file_of_owner(*, file_id: str, owner: str) -> BatchFile | None:
    """The owner's stored file, or None for any other (someone else's is not found, never forbidden)."""
    return BatchFile.objects.filter(pk=file_id, owner=owner, complete=True).first()


def file_delete(*, file: BatchFile) -> None:
    BatchFile.objects.filter(pk=file.pk).delete()


def file_object(*, file: BatchFile) -> dict[str, object]:
    """The file as OpenAI's `FileObject`."""
    return {
        "id": file.id,
        "object": "file",
        "bytes": file.bytes,
        "created_at": int(file.created_at.timestamp()),
        "filename": file.filename,
        "purpose": file.purpose,
        "status": "processed",
        "status_details": None,
        "expires_at": int(file.expires_at.timestamp()) if file.expires_at else None,
    }

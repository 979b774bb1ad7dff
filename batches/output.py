"""A batch's output and error files, written out from its items in line order when they are downloaded.

Every answered line is one JSON line in OpenAI's shape: `{"id", "custom_id", "response": {"status_code",
"request_id", "body"}, "error"}`; a 2xx goes to the output file, any other status and every line-level error
(a line that is not a request) to the error file. The body is the route's response exactly as it was sent.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections
from django.utils import timezone

from batches.lifecycle import batch_step
from batches.models import Batch, BatchFile, BatchItem

PAGE = 500
CHUNK_LINES = 500
"""Lines a download sends at a time."""


def item_line(*, item: BatchItem) -> bytes:
    """One output (or error) line, the stored response body embedded as it was sent."""
    head = b'{"id":' + orjson.dumps(f"batch_req_{item.pk:024x}") + b',"custom_id":' + orjson.dumps(item.custom_id)
    if item.status_code is None:
        return head + b',"response":null,"error":' + orjson.dumps(item.error) + b"}\n"
    response = (
        b'{"status_code":'
        + str(item.status_code).encode()
        + b',"request_id":'
        + orjson.dumps(item.request_id)
        + b',"body":'
        + (item.response.encode() or b"null")
        + b"}"
    )
    error = orjson.dumps(item.error) if item.error else b"null"
    return head + b',"response":' + response + b',"error":' + error + b"}\n"


def _items_of(*, batch_id: str, kind: str) -> Iterator[BatchItem]:
    """The batch's answered items that go in `kind`'s file, in line order, read a page at a time."""
    items = BatchItem.objects.filter(batch_id=batch_id, state=BatchItem.DONE)
    ok = {"status_code__gte": 200, "status_code__lt": 300}
    items = items.filter(**ok) if kind == BatchFile.OUTPUT else items.exclude(**ok)
    last = 0
    while page := list(items.filter(line__gt=last).order_by("line")[:PAGE]):
        yield from page
        last = page[-1].line


def file_lines(*, file: BatchFile) -> Iterator[bytes]:
    """A file's content: an upload's lines as sent, or an output or error file written from its batch."""
    if file.batch_id is None:
        last = 0
        while page := list(file.lines.filter(number__gt=last).order_by("number")[:PAGE]):
            for line in page:
                yield line.text.encode() + b"\n"
            last = page[-1].number
        return
    yield from batch_lines(batch_id=file.batch_id, kind=file.kind)


def batch_lines(*, batch_id: str, kind: str) -> Iterator[bytes]:
    """A batch's output (`kind` output) or error lines as answered so far, in line order: its file's content once
    it has ended, what it holds so far while it runs."""
    for item in _items_of(batch_id=batch_id, kind=kind):
        yield item_line(item=item)


async def lines_streamed(*, lines: Iterator[bytes]) -> AsyncIterator[bytes]:
    """`lines` sent `CHUNK_LINES` at a time, each chunk read in a thread of its own with its connection closed
    after: a 50,000-line file is never held whole, and a slow reader holds no connection between chunks."""
    while chunk := await sync_to_async(_chunk_read, thread_sensitive=False)(lines=lines):
        yield chunk


def _chunk_read(*, lines: Iterator[bytes]) -> bytes:
    try:
        return b"".join(itertools.islice(lines, CHUNK_LINES))
    finally:
        connections.close_all()


def batch_files_write(*, batch: Batch) -> None:
    """The batch's output and error files (those that have a line), sized and counted once it has ended, expiring
    when `manage.py prune_batches` deletes them with their batch (`OPENJEV_BATCH_RETENTION_DAYS` after its end)."""
    for kind in (BatchFile.OUTPUT, BatchFile.ERROR):
        count = size = 0
        for item in _items_of(batch_id=batch.id, kind=kind):
            count += 1
            size += len(item_line(item=item))
        if count:
            BatchFile.objects.update_or_create(
                id=f"file-{batch.id.removeprefix('batch_')}{kind[0]}",
                defaults={
                    "owner": batch.owner,
                    "purpose": "batch_output",
                    "kind": kind,
                    "filename": f"{batch.id}_{kind}.jsonl",
                    "bytes": size,
                    "line_count": count,
                    "batch": batch,
                    "complete": True,
                    "expires_at": timezone.now() + timedelta(days=settings.OPENJEV.batch_retention_days),
                },
            )


def batch_finish(*, batch_id: str) -> bool:
    """End a batch whose lines are all answered (completed), or that was cancelled or ran out of time: its files
    written first, then its status. Whether this call ended it (two workers finishing at once end it once)."""
    if batch_step(batch_id=batch_id, to="finalizing", among=("in_progress",)):
        batch = Batch.objects.get(pk=batch_id)
        batch_files_write(batch=batch)
        return batch_step(batch_id=batch_id, to="completed", among=("finalizing",))
    batch = Batch.objects.get(pk=batch_id)
    if batch.status == "cancelling":
        batch_files_write(batch=batch)
        return batch_step(batch_id=batch_id, to="cancelled", among=("cancelling",))
    return False


def batch_expire(*, batch_id: str) -> bool:
    """End a batch past its window: what was answered is in its files, the rest is not run."""
    batch = Batch.objects.get(pk=batch_id)
    batch_files_write(batch=batch)
    return batch_step(batch_id=batch_id, to="expired", among=("validating", "in_progress", "cancelling"))

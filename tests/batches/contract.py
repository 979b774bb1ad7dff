"""The response contract's cases for OpenAI's Files and Batches routes (`api.batches.views`): each documented status
of each operation, driven through the application on the test database, batches validated by the real task worker.
"""

from __future__ import annotations

import json
from typing import Any

from api.batches import views as batch_views
from api.decisions.openapi_examples import DECISIONS_REQUEST
from tests.batches.conftest import file_upload, jsonl, line_of, tasks_run
from tests.docs.contract import (
    CROSS_SITE,
    Case,
    Ctx,
    Drive,
    Operation,
    Reply,
    bug,
    cross_site_post,
    get_path,
    ok,
    raw,
    stalled,
    too_large,
    unauthenticated,
)

LINES = jsonl([line_of(custom_id=f"ticket-{i}", url="/v1/decisions", body=DECISIONS_REQUEST) for i in range(2)])
TWICE = jsonl([line_of(custom_id="ticket", url="/v1/decisions", body=DECISIONS_REQUEST)] * 2)
"""A file that is not a batch: its two lines share a `custom_id` (the batch fails validation, naming the line)."""
NOT_UTF8 = b'{"custom_id": "\xff\xfe"}\n'
TEXT = {"Content-Type": "text/plain"}
NO_BOUNDARY = {"Content-Type": "multipart/form-data"}
UNKNOWN_FILE, UNKNOWN_BATCH = "file-000000000000000000000000", "batch_000000000000000000000000"


async def _upload(ctx: Ctx, content: bytes = LINES, **kwargs: Any) -> Reply:
    return Reply.of(await file_upload(ctx.api, content, **kwargs))


async def _file_id(ctx: Ctx, content: bytes = LINES) -> str:
    uploaded = await _upload(ctx, content)
    assert uploaded.status == 200, uploaded.body
    file_id: str = json.loads(uploaded.body)["id"]
    return file_id


def _creation(file_id: str) -> dict[str, Any]:
    return {"input_file_id": file_id, "endpoint": "/v1/decisions", "completion_window": "24h"}


async def _batch_id(ctx: Ctx, content: bytes = LINES, *, validated: bool = False) -> str:
    """A batch over an upload of `content`; `validated`: after the task worker has run its validation."""
    created = await ctx.post("/v1/batches", _creation(await _file_id(ctx, content)))
    assert created.status == 200, created.body
    if validated:
        await tasks_run()
    batch_id: str = json.loads(created.body)["id"]
    return batch_id


def upload(
    content: bytes = LINES,
    *,
    auth_on: bool = False,
    limit: int | None = None,
    file_limit: int | None = None,
    **kwargs: Any,
) -> Drive:
    """An upload (after one more, where the key may send `limit` requests a minute; with files limited to
    `file_limit` bytes)."""

    async def drive(ctx: Ctx) -> Reply:
        if auth_on:
            ctx.auth_on()
        if file_limit is not None:
            ctx.configure(batch_max_file_bytes=file_limit)
        if limit is not None:
            ctx.configure(key_requests_per_minute=limit)
            assert (await _upload(ctx)).status == 200
        return await _upload(ctx, content, **kwargs)

    return drive


def upload_broken(name: str) -> Drive:
    """A bug in what `POST /v1/files` calls (`api.batches.views.<name>`)."""

    async def drive(ctx: Ctx) -> Reply:
        ctx.broken(batch_views, name)
        return await _upload(ctx)

    return drive


def on_file(method: str, suffix: str = "", *, broken: str | None = None) -> Drive:
    """`method` on an uploaded file's path (+ `suffix`), with `api.batches.views.<broken>` failing if named."""

    async def drive(ctx: Ctx) -> Reply:
        file_id = await _file_id(ctx)
        if broken is not None:
            ctx.broken(batch_views, broken)
        return Reply.of(await ctx.api.request(method, f"/v1/files/{file_id}{suffix}"))

    return drive


def deleted(path: str, *, auth_on: bool = False) -> Drive:
    async def drive(ctx: Ctx) -> Reply:
        if auth_on:
            ctx.auth_on()
        return Reply.of(await ctx.api.delete(path))

    return drive


def listed(path: str, *, content: bytes | None = None) -> Drive:
    """`GET path` once an upload of `content` has been made a batch and validated (none: nothing made first)."""

    async def drive(ctx: Ctx) -> Reply:
        if content is not None:
            await _batch_id(ctx, content, validated=True)
        return await ctx.get(path)

    return drive


def on_batch(suffix: str = "", *, content: bytes = LINES, validated: bool = False) -> Drive:
    """`GET /v1/batches/{id}` (or a POST to `suffix` under it) of a batch over an upload of `content`."""

    async def drive(ctx: Ctx) -> Reply:
        batch_id = await _batch_id(ctx, content, validated=validated)
        path = f"/v1/batches/{batch_id}{suffix}"
        return await (ctx.post(path, {}) if suffix else ctx.get(path))

    return drive


def created(*, limit: int | None = None, lines: int = 0) -> Drive:
    """A batch created over an upload (of `lines` tiny lines, if any), the key sending `limit` requests a minute
    from then on."""

    async def drive(ctx: Ctx) -> Reply:
        content = jsonl([line_of(custom_id=str(i), url="/v1/decisions", body={}) for i in range(lines)]) or LINES
        file_id = await _file_id(ctx, content)
        if limit is not None:
            ctx.configure(key_requests_per_minute=limit)
        answer = await ctx.post("/v1/batches", _creation(file_id))
        assert answer.status != 429 or b"within the completion window" in answer.body, answer.body
        return answer

    return drive


def created_over_limit() -> Drive:
    async def drive(ctx: Ctx) -> Reply:
        ctx.configure(key_requests_per_minute=1)
        return await ctx.post("/v1/batches", _creation(await _file_id(ctx)))

    return drive


def created_broken(name: str) -> Drive:
    async def drive(ctx: Ctx) -> Reply:
        file_id = await _file_id(ctx)
        ctx.broken(batch_views, name)
        return await ctx.post("/v1/batches", _creation(file_id))

    return drive


def cancelled_cross_site() -> Drive:
    async def drive(ctx: Ctx) -> Reply:
        return await ctx.post(f"/v1/batches/{await _batch_id(ctx)}/cancel", {}, headers=CROSS_SITE)

    return drive


BATCH_BODY = _creation(UNKNOWN_FILE)
WINDOW_PER_KEY_MINUTE = 24 * 60
"""Lines one request a minute runs within the 24-hour window: one more is refused at creation."""

BATCH_CASES: dict[Operation, list[Case]] = {
    ("post", "/v1/files"): [
        Case("a JSONL file of decision lines", 200, upload()),
        Case("purpose fine-tune", 400, upload(purpose="fine-tune")),
        Case("a file that is not UTF-8 text", 400, upload(NOT_UTF8)),
        Case("multipart without its boundary", 400, raw("/v1/files", b"--x--", NO_BOUNDARY)),
        Case("no key while auth is on", 401, upload(auth_on=True)),
        Case("a browser upload from another origin", 403, upload(headers=CROSS_SITE)),
        Case("a body that stops arriving", 408, stalled("/v1/files")),
        Case("a file over batch_max_file_bytes", 413, upload(b"x" * 2048, file_limit=1024)),
        Case("a body neither multipart nor JSON", 415, raw("/v1/files", b"x", TEXT)),
        Case("over the requests per minute", 429, upload(limit=1)),
        Case("a bug", 500, upload_broken("upload_stored")),
    ],
    ("get", "/v1/files"): [
        Case("a page of one file, more after it", 200, listed("/v1/files?limit=1", content=LINES)),
        Case("limit 0", 400, get_path("/v1/files?limit=0")),
        Case("no key while auth is on", 401, unauthenticated("/v1/files")),
        Case("a bug", 500, bug("/v1/files", None, batch_views, "page_asked")),
    ],
    ("get", "/v1/files/{file_id}"): [
        Case("an upload", 200, on_file("GET")),
        Case("no key while auth is on", 401, unauthenticated(f"/v1/files/{UNKNOWN_FILE}")),
        Case("no file of that id", 404, get_path(f"/v1/files/{UNKNOWN_FILE}")),
        Case("a bug", 500, on_file("GET", broken="file_of_owner")),
    ],
    ("delete", "/v1/files/{file_id}"): [
        Case("an upload", 200, on_file("DELETE")),
        Case("no key while auth is on", 401, deleted(f"/v1/files/{UNKNOWN_FILE}", auth_on=True)),
        Case("no file of that id", 404, deleted(f"/v1/files/{UNKNOWN_FILE}")),
        Case("a bug", 500, on_file("DELETE", broken="file_delete")),
    ],
    ("get", "/v1/files/{file_id}/content"): [
        Case("an upload, as sent", 200, on_file("GET", "/content")),
        Case("no key while auth is on", 401, unauthenticated(f"/v1/files/{UNKNOWN_FILE}/content")),
        Case("no file of that id", 404, get_path(f"/v1/files/{UNKNOWN_FILE}/content")),
        Case("a bug", 500, on_file("GET", "/content", broken="file_of_owner")),
    ],
    ("post", "/v1/batches"): [
        Case("every line of an upload", 200, created()),
        Case("an endpoint not served", 400, ok("/v1/batches", {**BATCH_BODY, "endpoint": "/v1/chat/completions"})),
        Case("no key while auth is on", 401, unauthenticated("/v1/batches", BATCH_BODY)),
        Case("a browser post from another origin", 403, cross_site_post("/v1/batches", BATCH_BODY)),
        Case("no upload of that id", 404, ok("/v1/batches", BATCH_BODY)),
        Case("a body that stops arriving", 408, stalled("/v1/batches")),
        Case("a body over max_body_bytes", 413, too_large("/v1/batches")),
        Case("a body not declared JSON", 415, raw("/v1/batches", b"{}", TEXT)),
        Case("the upload used the key's one request a minute", 429, created_over_limit()),
        Case(
            "more lines than the key runs in the window",
            429,
            created(limit=1, lines=WINDOW_PER_KEY_MINUTE + 1),
        ),
        Case("a bug", 500, created_broken("batch_started")),
    ],
    ("get", "/v1/batches"): [
        Case("a batch that failed validation, naming its lines", 200, listed("/v1/batches", content=TWICE)),
        Case("limit not a number", 400, get_path("/v1/batches?limit=ten")),
        Case("no key while auth is on", 401, unauthenticated("/v1/batches")),
        Case("a bug", 500, bug("/v1/batches", None, batch_views, "page_asked")),
    ],
    ("get", "/v1/batches/{batch_id}"): [
        Case("a batch that failed validation, naming its lines", 200, on_batch(content=TWICE, validated=True)),
        Case("a batch validating", 200, on_batch()),
        Case("no key while auth is on", 401, unauthenticated(f"/v1/batches/{UNKNOWN_BATCH}")),
        Case("no batch of that id", 404, get_path(f"/v1/batches/{UNKNOWN_BATCH}")),
        Case("a bug", 500, bug(f"/v1/batches/{UNKNOWN_BATCH}", None, batch_views, "batch_of_owner")),
    ],
    ("post", "/v1/batches/{batch_id}/cancel"): [
        Case("a batch validating: cancelling", 200, on_batch("/cancel")),
        Case("a batch that has failed: as it is", 200, on_batch("/cancel", content=TWICE, validated=True)),
        Case("no key while auth is on", 401, unauthenticated(f"/v1/batches/{UNKNOWN_BATCH}/cancel", {})),
        Case("a browser post from another origin", 403, cancelled_cross_site()),
        Case("no batch of that id", 404, ok(f"/v1/batches/{UNKNOWN_BATCH}/cancel", {})),
        Case("a bug", 500, bug(f"/v1/batches/{UNKNOWN_BATCH}/cancel", {}, batch_views, "batch_of_owner")),
    ],
}
"""Every operation of the Files and Batches routes: each runs on the test database."""

CREATED_WITHOUT_ERRORS = "a batch is created validating: `errors` comes with its validation (GET shows it)"
BATCH_NEVER_SHOWN: dict[Operation, dict[str, str]] = {
    ("post", "/v1/batches"): dict.fromkeys(
        (
            "BatchErrors.object",
            "BatchErrors.data",
            "BatchError.code",
            "BatchError.message",
            "BatchError.param",
            "BatchError.line",
        ),
        CREATED_WITHOUT_ERRORS,
    )
}
"""Documented properties no exercised answer of the operation shows, with the reason."""

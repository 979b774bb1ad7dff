"""OpenAI's Files and Batches routes, for decision lines: thin views over `batches` (storage and lifecycle) and
`api.batches.tasks` (the work), every answer in OpenAI's shape so the official SDK reads it unchanged.

A key sees only its own files and batches: another key's id is not found (404), never forbidden, so ids leak
nothing. Every route is admitted under the caller's limits as any route is (a paused key is refused here too).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from django.db import connections
from django.db.models import QuerySet
from django.http import HttpResponse, StreamingHttpResponse
from django.http.multipartparser import MultiPartParserError
from django.utils.http import content_disposition_header
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.request import Request

from api.batches import openapi as doc
from api.batches.jobs import batch_started, upload_stored
from api.batches.owners import owner_of
from api.batches.requests import Page, batch_asked, object_not_found, page_asked, purpose_checked
from api.checking.json_body import BodyNotJson, body_parse
from api.decisions.errors import OPENAI_SHAPE
from api.plumbing.api_error import ApiError
from api.plumbing.cross_site import cross_site_refused, origin_refused
from api.plumbing.json_render import json_response
from api.plumbing.ratelimits import request_admitted
from api.plumbing.requestids import client_address_current
from api.views import ApiView
from audit.callers import Caller
from batches.files import FileRefused, file_delete, file_object, file_of_owner
from batches.lifecycle import batch_cancel, batch_object, batch_of_owner
from batches.models import Batch, BatchFile
from batches.output import file_lines, lines_streamed


async def _in_thread[T](work: Callable[..., T], /, **kwargs: Any) -> T:
    """Database work (and an upload's parsing) off the event loop, in a thread of its own rather than the one
    thread every `thread_sensitive` call of the API shares (an upload being stored would hold up every other
    call), the thread's connection closed after it (idle connections add up across workers)."""

    def run() -> T:
        try:
            return work(**kwargs)
        finally:
            connections.close_all()

    return await sync_to_async(run, thread_sensitive=False)()


def _caller(request: Request) -> Caller | None:
    return request.auth if isinstance(request.auth, Caller) else None


class BatchApiView(ApiView):
    """Errors in OpenAI's shape; each call admitted under its caller's limits (what every route counts)."""

    shape = OPENAI_SHAPE

    async def _admitted(self, request: Request, answer: Callable[[], Awaitable[HttpResponse]]) -> HttpResponse:
        async with request_admitted(caller=_caller(request), address=client_address_current()):
            return await answer()


def _page(*, rows: QuerySet[Any], page: Page, render: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    """OpenAI's cursor page, newest first: `after` is the last id of the previous page."""
    if page.after is not None:
        cursor = rows.filter(pk=page.after).values_list("created_at", flat=True).first()
        rows = rows.filter(created_at__lt=cursor) if cursor is not None else rows.none()
    shown = list(rows.order_by("-created_at", "-pk")[: page.limit + 1])
    data = [render(row) for row in shown[: page.limit]]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": len(shown) > page.limit,
    }


def _upload_stored(*, request: Request, owner: str) -> BatchFile:
    """The multipart upload parsed (Django's parser: large files spill to a temporary file) and stored line by
    line (`api.batches.jobs`); in a thread, since both are linear work over up to `OPENJEV_BATCH_MAX_FILE_BYTES`."""
    django_request = request._request
    try:
        purpose, upload = django_request.POST.get("purpose"), django_request.FILES.get("file")
    except (MultiPartParserError, SuspiciousOperation):  # a broken body, or more parts than Django reads
        raise ApiError(400, "invalid_request", "the body is not a multipart/form-data upload", param="file") from None
    try:
        purpose = purpose_checked(value=purpose)
        if upload is None:
            raise ApiError(400, "invalid_request", "the upload has no `file` part", param="file")
        if upload.size is not None and upload.size > (limit := settings.OPENJEV.batch_max_file_bytes):
            raise ApiError(413, "request_too_large", f"the file is over {limit} bytes", param="file")
        return upload_stored(source=upload, filename=upload.name or "upload.jsonl", owner=owner, purpose=purpose)
    except FileRefused as exc:
        raise ApiError(400, exc.code, str(exc), param="file") from None
    finally:
        if upload is not None:
            upload.close()  # a large upload's temporary file goes now, whatever was refused


class FilesView(BatchApiView):
    """`POST /v1/files` (`files.create`, purpose batch) and `GET /v1/files` (`files.list`)."""

    @doc.file_create_schema
    async def post(self, request: Request) -> HttpResponse:
        cross_site_refused(request, content_type=request._request.META.get("CONTENT_TYPE", ""), multipart=True)

        async def answer() -> HttpResponse:
            stored = await _in_thread(_upload_stored, request=request, owner=owner_of(caller=_caller(request)))
            return json_response(body=file_object(file=stored))

        return await self._admitted(request, answer)

    @doc.files_list_schema
    async def get(self, request: Request) -> HttpResponse:
        page = page_asked(query=request._request.GET)
        owner = owner_of(caller=_caller(request))

        def listed() -> dict[str, Any]:
            rows = BatchFile.objects.filter(owner=owner, complete=True)
            purpose = request._request.GET.get("purpose")
            if purpose:
                rows = rows.filter(purpose=purpose[:32])
            return _page(rows=rows, page=page, render=lambda file: file_object(file=file))

        return json_response(body=await _in_thread(listed))


async def _file_owned(request: Request, file_id: str) -> BatchFile:
    found = await _in_thread(file_of_owner, file_id=file_id, owner=owner_of(caller=_caller(request)))
    if found is None:
        raise object_not_found("File", file_id)
    return found


class FileView(BatchApiView):
    """`GET /v1/files/{id}` (`files.retrieve`) and `DELETE` (`files.delete`): a file a batch still reads is kept
    until its batch ends."""

    @doc.file_schema
    async def get(self, request: Request, file_id: str) -> HttpResponse:
        return json_response(body=file_object(file=await _file_owned(request, file_id)))

    @doc.file_delete_schema
    async def delete(self, request: Request, file_id: str) -> HttpResponse:
        found = await _file_owned(request, file_id)
        await _in_thread(file_delete, file=found)
        return json_response(body={"id": found.id, "object": "file", "deleted": True})


class AnyAccepted(BaseContentNegotiation):
    """A file's content is what it is, whatever `Accept` says (the SDK asks for `application/binary`): errors
    are still JSON."""

    def select_renderer(self, request: Any, renderers: Any, format_suffix: str | None = None) -> Any:
        return renderers[0], renderers[0].media_type

    def select_parser(self, request: Any, parsers: Any) -> Any:
        return parsers[0] if parsers else None


class FileContentView(BatchApiView):
    """`GET /v1/files/{id}/content` (`files.content`): the upload as sent, or a batch's output or error file,
    streamed a page at a time so a 50,000-line file is never held whole."""

    content_negotiation_class = AnyAccepted

    @doc.file_content_schema
    async def get(self, request: Request, file_id: str) -> StreamingHttpResponse:  # type: ignore[override]
        found = await _file_owned(request, file_id)
        response = StreamingHttpResponse(lines_streamed(lines=file_lines(file=found)), content_type="application/jsonl")
        response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=found.filename)
        return response


def _batch_started(*, request: Request, data: Any) -> Batch:
    return batch_started(caller=_caller(request), asked=batch_asked(data=data))


class BatchesView(BatchApiView):
    """`POST /v1/batches` (`batches.create`) and `GET /v1/batches` (`batches.list`)."""

    @doc.batch_create_schema
    async def post(self, request: Request) -> HttpResponse:
        content_type = request._request.META.get("CONTENT_TYPE", "")
        cross_site_refused(request, content_type=content_type, multipart=False)
        try:
            data = body_parse(request._request.body)
        except BodyNotJson as exc:
            raise OPENAI_SHAPE.json_invalid(exc) from None

        async def answer() -> HttpResponse:
            batch = await _in_thread(_batch_started, request=request, data=data)
            return json_response(body=await _in_thread(batch_object, batch=batch))

        return await self._admitted(request, answer)

    @doc.batches_list_schema
    async def get(self, request: Request) -> HttpResponse:
        page = page_asked(query=request._request.GET)
        owner = owner_of(caller=_caller(request))

        def listed() -> dict[str, Any]:
            rows = Batch.objects.filter(owner=owner).prefetch_related("files")
            return _page(rows=rows, page=page, render=lambda batch: batch_object(batch=batch))

        return json_response(body=await _in_thread(listed))


async def _batch_owned(request: Request, batch_id: str) -> Batch:
    found = await _in_thread(batch_of_owner, batch_id=batch_id, owner=owner_of(caller=_caller(request)))
    if found is None:
        raise object_not_found("Batch", batch_id)
    return found


class BatchView(BatchApiView):
    """`GET /v1/batches/{id}` (`batches.retrieve`)."""

    @doc.batch_schema
    async def get(self, request: Request, batch_id: str) -> HttpResponse:
        found = await _batch_owned(request, batch_id)
        return json_response(body=await _in_thread(batch_object, batch=found))


class BatchCancelView(BatchApiView):
    """`POST /v1/batches/{id}/cancel` (`batches.cancel`): cancelling, then cancelled once running lines end; a
    batch that has ended is answered as it is (cancelling twice is harmless)."""

    @doc.batch_cancel_schema
    async def post(self, request: Request, batch_id: str) -> HttpResponse:
        origin_refused(request)  # a page of another site may not stop a batch (a form posts cross-site unasked)
        found = await _batch_owned(request, batch_id)

        def cancelled() -> dict[str, Any]:
            return batch_object(batch=batch_cancel(batch=found))

        return json_response(body=await _in_thread(cancelled))

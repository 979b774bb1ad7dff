"""Batches in the admin: every batch with its progress (a bar, its counts, lines a second, the time left), its
owner key and status; cancelling and downloading its files (input, output, errors: what is answered so far while
it runs); and its lines, each linked to the evaluation stored for it.

Batches are run by their workers and kept by `manage.py prune_batches`, so nothing here adds, edits or deletes
one: the change permission on batches is the permission to cancel them. Every page needs the view permission of
what it shows, as the other admins' pages do (a line's evaluation link the view permission on evaluations, the
owner key's link the one on keys).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db.models import OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Substr
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, StreamingHttpResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.http import content_disposition_header, urlencode
from django.utils.safestring import SafeString

from audit.admin.display import badge_html, json_pretty
from audit.models import ApiKey
from audit.permissions import VIEW_API_KEYS
from batches.lifecycle import batch_cancel
from batches.models import Batch, BatchFile
from batches.output import batch_lines, file_lines, lines_streamed
from batches.progress import batch_progress, duration_text

STATUS_COLOURS = {
    "validating": "#546e7a",
    "in_progress": "#1565c0",
    "finalizing": "#1565c0",
    "completed": "#2e7d32",
    "failed": "#c62828",
    "expired": "#b26a00",
    "cancelling": "#b26a00",
    "cancelled": "#757575",
}
VIEW_ITEMS = "batches.view_batchitem"
KEY_LABEL_PREFIX = "oj_"
DOWNLOADS = ("input", BatchFile.OUTPUT, BatchFile.ERROR)


def _json_or_none(value: Any) -> SafeString:
    return format_html('<span class="oj-muted">{}</span>', "none") if value is None else json_pretty(value=value)


@admin.register(Batch)
class BatchAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "status_badge",
        "progress_bar",
        "counts",
        "rate",
        "eta",
        "owner_display",
        "endpoint",
        "created_at",
    )
    list_filter = ("status", "endpoint", "labelled", ("owner", admin.AllValuesFieldListFilter), "created_at")
    search_fields = ("=id", "^owner", "=input_file_key")
    search_help_text = "Batch id, owner key (oj_…), input file id."
    date_hierarchy = "created_at"
    list_per_page = 50
    actions = ("cancel_selected", "download_output", "download_errors")
    readonly_fields = (
        "id",
        "status_badge",
        "endpoint",
        "labelled",
        "owner_display",
        "metadata_pretty",
        "created_at",
        "expires_at",
        "progress_bar",
        "counts",
        "rate",
        "eta",
        "lines_link",
        "files_links",
        "in_progress_at",
        "finalizing_at",
        "completed_at",
        "failed_at",
        "expired_at",
        "cancelling_at",
        "cancelled_at",
        "errors_pretty",
        "input_tokens",
        "cached_tokens",
        "output_tokens",
    )
    fieldsets = (
        (None, {"fields": ("id", "status_badge", "endpoint", "labelled", "owner_display", "metadata_pretty")}),
        ("Progress", {"fields": ("progress_bar", "counts", ("rate", "eta"), "lines_link", "files_links")}),
        (
            "Timeline",
            {
                "fields": (
                    ("created_at", "expires_at"),
                    ("in_progress_at", "finalizing_at"),
                    ("completed_at", "failed_at", "expired_at"),
                    ("cancelling_at", "cancelled_at"),
                )
            },
        ),
        ("Validation errors", {"fields": ("errors_pretty",)}),
        ("Usage", {"fields": (("input_tokens", "cached_tokens", "output_tokens"),)}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Batch]:
        """The batches with their owner key's id and name, and what the viewer may see of what they link to (the
        columns read it from each row: a model admin is shared by every request)."""
        keys = ApiKey.objects.filter(prefix=Substr(OuterRef("owner"), len(KEY_LABEL_PREFIX) + 1))
        return (
            super()
            .get_queryset(request)
            .annotate(
                key_id=Subquery(keys.values("pk")[:1]),
                key_name=Subquery(keys.values("name")[:1]),
                viewer_sees_keys=Value(request.user.has_perm(VIEW_API_KEYS)),
                viewer_sees_lines=Value(request.user.has_perm(VIEW_ITEMS)),
            )
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # created through POST /v1/batches, `manage.py batch create` or `evaluate_dataset`

    def has_delete_permission(self, request: HttpRequest, obj: Batch | None = None) -> bool:
        return False  # kept for OPENJEV_BATCH_RETENTION_DAYS after it ends, then `manage.py prune_batches`

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """Every field is read-only: the page has nothing to save (cancelling is an action of the list)."""
        shown = {"show_save": False, "show_save_and_continue": False, "show_save_and_add_another": False}
        return super().changeform_view(request, object_id, form_url, {**(extra_context or {}), **shown})

    def get_urls(self) -> list[URLPattern]:
        download = self.admin_site.admin_view(self.download_view)
        return [
            path("<path:object_id>/download/<str:kind>/", download, name="batches_batch_download"),
            *super().get_urls(),
        ]

    def download_view(self, request: HttpRequest, object_id: str, kind: str) -> StreamingHttpResponse:
        """A batch's input file as uploaded, or its output or error lines (answered so far, while it runs)."""
        batch = self.get_object(request, unquote(object_id))
        if batch is None or kind not in DOWNLOADS:
            raise Http404("no such batch or file")
        if not self.has_view_permission(request, batch):
            raise PermissionDenied
        if kind == "input":
            upload = BatchFile.objects.filter(pk=batch.input_file_key).first()
            if upload is None:
                raise Http404("the input file has been deleted")
            lines, filename = file_lines(file=upload), upload.filename
        else:
            lines, filename = batch_lines(batch_id=batch.id, kind=kind), f"{batch.id}_{kind}.jsonl"
        response = StreamingHttpResponse(lines_streamed(lines=lines), content_type="application/jsonl")
        response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=filename)
        return response

    def _download_url(self, batch: Batch, kind: str) -> str:
        return reverse("admin:batches_batch_download", args=[quote(batch.pk), kind])

    @admin.action(description="Cancel selected batches (running lines finish, none starts)", permissions=["change"])
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[Batch]) -> None:
        running = [batch for batch in queryset if batch.status not in Batch.ENDED]
        for batch in running:
            batch_cancel(batch=batch)  # what POST /v1/batches/{id}/cancel does
        ended = queryset.count() - len(running)
        self.message_user(
            request,
            f"{len(running)} batch(es) cancelling: they end once their running lines do"
            + (f"; {ended} had ended already" if ended else "."),
            messages.SUCCESS if running else messages.WARNING,
        )

    @admin.action(description="Download the output file of the selected batch", permissions=["view"])
    def download_output(self, request: HttpRequest, queryset: QuerySet[Batch]) -> HttpResponse | None:
        return self._download_one(request, queryset, kind=BatchFile.OUTPUT)

    @admin.action(description="Download the error file of the selected batch", permissions=["view"])
    def download_errors(self, request: HttpRequest, queryset: QuerySet[Batch]) -> HttpResponse | None:
        return self._download_one(request, queryset, kind=BatchFile.ERROR)

    def _download_one(self, request: HttpRequest, queryset: QuerySet[Batch], *, kind: str) -> HttpResponse | None:
        chosen = list(queryset[:2])
        if len(chosen) != 1:
            self.message_user(request, "Select one batch to download its file.", messages.WARNING)
            return None
        return HttpResponseRedirect(self._download_url(chosen[0], kind))

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj: Batch) -> SafeString:
        return badge_html(text=obj.status.replace("_", " "), colour=STATUS_COLOURS[obj.status])

    @admin.display(description="progress")
    def progress_bar(self, obj: Batch) -> SafeString:
        progress = batch_progress(batch=obj)
        percent = f"{progress.fraction * 100:.0f}"
        return format_html(
            '<div class="oj-progress{}" title="{} of {} lines answered"><div class="oj-bar-track">'
            '<div class="oj-bar-fill" style="width: {}%"></div></div><span class="oj-num">{}%</span></div>',
            "" if obj.status in Batch.ENDED else " oj-running",
            progress.done,
            progress.total,
            percent,
            percent,
        )

    @admin.display(description="lines (ok · failed · total)")
    def counts(self, obj: Batch) -> str:
        return f"{obj.completed:,} · {obj.failed:,} · {obj.total:,}"

    @admin.display(description="lines/s")
    def rate(self, obj: Batch) -> str:
        rate = batch_progress(batch=obj).rate
        return "—" if rate is None else f"{rate:.1f}"

    @admin.display(description="time left")
    def eta(self, obj: Batch) -> str:
        return duration_text(batch_progress(batch=obj).eta)

    @admin.display(description="API key", ordering="owner")
    def owner_display(self, obj: Batch) -> SafeString | str:
        """The owner as recorded (`oj_<prefix>`, `env`, or none with auth off), with its key's name where it is an
        issued key, linked to the key for staff who may view keys."""
        key_id, key_name = getattr(obj, "key_id", None), getattr(obj, "key_name", None)
        if not obj.owner:
            return "— (auth off)"
        if key_id is None or key_name is None:
            return obj.owner
        if getattr(obj, "viewer_sees_keys", False):
            url = reverse("admin:evaluations_apikey_change", args=[key_id])
            return format_html('<a href="{}">{} ({})</a>', url, key_name, obj.owner)
        return f"{key_name} ({obj.owner})"

    def get_fieldsets(self, request: HttpRequest, obj: Batch | None = None) -> Any:
        """The validation errors only for a batch that has them (one that failed before any line ran)."""
        return [f for f in self.fieldsets if obj is None or obj.errors or f[0] != "Validation errors"]

    @admin.display(description="metadata")
    def metadata_pretty(self, obj: Batch) -> SafeString:
        return _json_or_none(obj.metadata)

    @admin.display(description="errors")
    def errors_pretty(self, obj: Batch) -> SafeString:
        return _json_or_none(obj.errors["data"] if obj.errors else None)

    @admin.display(description="lines")
    def lines_link(self, obj: Batch) -> SafeString | str:
        if not getattr(obj, "viewer_sees_lines", False):
            return f"{obj.total:,} lines"
        url = reverse("admin:batches_batchitem_changelist") + "?" + urlencode({"batch": obj.pk})
        return format_html(
            '<a href="{}">its {} lines</a> · <a href="{}&outcome=error">the {} answered with an error</a>',
            url,
            f"{obj.total:,}",
            url,
            f"{obj.failed:,}",
        )

    @admin.display(description="files")
    def files_links(self, obj: Batch) -> SafeString:
        so_far = "" if obj.status in Batch.ENDED else " (so far)"
        return format_html(
            '<a href="{}">input</a> · <a href="{}">output{}</a> · <a href="{}">errors{}</a>',
            self._download_url(obj, "input"),
            self._download_url(obj, BatchFile.OUTPUT),
            so_far,
            self._download_url(obj, BatchFile.ERROR),
            so_far,
        )

"""A batch's lines in the admin, read-only: each line's state, its route's status and error, and a link to the
evaluation stored for it (found by its request id), for staff who may view evaluations."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.db.models import OuterRef, Q, QuerySet, Subquery, Value
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from audit.admin.display import json_pretty, status_badge_html
from audit.models import Evaluation
from audit.permissions import VIEW_EVALUATIONS
from batches.models import BatchItem

OK = Q(status_code__gte=200, status_code__lt=300)
OUTCOMES = {"ok": OK, "error": Q(state=BatchItem.DONE) & ~OK, "waiting": ~Q(state=BatchItem.DONE)}
"""A line's outcome: in the output file, in the error file, or not answered yet."""


class BatchFilter(admin.SimpleListFilter):
    """The lines of one batch (the batch's page links here): the batch chosen is the only choice shown, since a
    list of every batch would be as long as the batches."""

    title = "batch"
    parameter_name = "batch"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        chosen = request.GET.get(self.parameter_name)
        return [(chosen, chosen)] if chosen else []

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(batch_id=value) if value else queryset


class OutcomeFilter(admin.SimpleListFilter):
    title = "outcome"
    parameter_name = "outcome"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("ok", "answered 2xx (output file)"), ("error", "answered with an error"), ("waiting", "not answered")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(OUTCOMES[value]) if value in OUTCOMES else queryset


@admin.register(BatchItem)
class BatchItemAdmin(admin.ModelAdmin):
    list_display = (
        "line",
        "custom_id",
        "batch_link",
        "state",
        "status_badge",
        "error_message",
        "evaluation_link",
        "attempts",
        "finished_at",
    )
    list_display_links = ("line", "custom_id")
    list_filter = (BatchFilter, OutcomeFilter, "state")
    search_fields = ("=custom_id", "=request_id", "=batch__id")
    search_help_text = "custom_id, request id, batch id."
    list_per_page = 100
    show_full_result_count = False
    ordering = ("batch", "line")
    readonly_fields = (
        "batch_link",
        "line",
        "custom_id",
        "state",
        "attempts",
        "claimed_by",
        "claimed_at",
        "finished_at",
        "status_badge",
        "request_id",
        "evaluation_link",
        "error_pretty",
        "response_pretty",
        "label_pretty",
    )
    fields = readonly_fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[BatchItem]:
        """The lines with the id of their stored evaluation, and whether the viewer may open it."""
        stored = Evaluation.objects.filter(request_id=OuterRef("request_id")).values("pk")[:1]
        return (
            super()
            .get_queryset(request)
            .annotate(
                evaluation_id=Subquery(stored),
                viewer_sees_evaluations=Value(request.user.has_perm(VIEW_EVALUATIONS)),
            )
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: BatchItem | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: BatchItem | None = None) -> bool:
        return False

    @admin.display(description="batch", ordering="batch")
    def batch_link(self, obj: BatchItem) -> SafeString:
        url = reverse("admin:batches_batch_change", args=[quote(obj.batch_id)])
        return format_html('<a href="{}">{}</a>', url, obj.batch_id)

    @admin.display(description="status", ordering="status_code")
    def status_badge(self, obj: BatchItem) -> SafeString | str:
        return "—" if obj.status_code is None else status_badge_html(status=obj.status_code)

    @admin.display(description="error")
    def error_message(self, obj: BatchItem) -> str:
        return str((obj.error or {}).get("message", ""))[:200]

    @admin.display(description="evaluation")
    def evaluation_link(self, obj: BatchItem) -> SafeString | str:
        stored = getattr(obj, "evaluation_id", None)
        if stored is None:
            return "—" if not obj.request_id else "not stored"
        if not getattr(obj, "viewer_sees_evaluations", False):
            return obj.request_id
        url = reverse("admin:evaluations_evaluation_change", args=[stored])
        return format_html('<a href="{}">{}</a>', url, obj.request_id)

    @admin.display(description="error")
    def error_pretty(self, obj: BatchItem) -> SafeString:
        return json_pretty(value=obj.error)

    @admin.display(description="response body")
    def response_pretty(self, obj: BatchItem) -> SafeString:
        """The route's answer as it was sent (shown as JSON where it is)."""
        if not obj.response:
            return json_pretty(value=None)
        try:
            return json_pretty(value=json.loads(obj.response))
        except ValueError:
            return format_html('<pre class="oj-json">{}</pre>', obj.response)

    @admin.display(description="label (a labelled run's expected answer)")
    def label_pretty(self, obj: BatchItem) -> SafeString:
        return json_pretty(value=obj.label)

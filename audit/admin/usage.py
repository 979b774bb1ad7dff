"""Usage per API key per day: the table, read-only, and one key's last 30 days as a chart (uPlot, served from
this server like every admin chart)."""

from __future__ import annotations

from datetime import UTC, timedelta

from django.contrib import admin
from django.contrib.admin import AdminSite
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.utils import timezone

from audit.models import ApiKey, KeyUsage
from audit.permissions import VIEW_API_KEYS
from audit.storage.usage import usage_export

CHART_DAYS = 30


@admin.register(KeyUsage)
class KeyUsageAdmin(admin.ModelAdmin):
    list_display = ("day", "key_label", "evaluations", "questions", "input_tokens", "cached_tokens")
    list_filter = ("key_label",)
    date_hierarchy = "day"
    search_fields = ("^key_label",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: KeyUsage | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: KeyUsage | None = None) -> bool:
        return False


def apikey_usage_view(request: HttpRequest, pk: int, *, site: AdminSite) -> HttpResponse:
    """One key's usage over the last 30 days (UTC), every day shown, a day without use as 0. It names the key and
    its volumes, so it needs the view permission on API keys, as the keys' list does (`admin_view` admits any
    staff user)."""
    if not request.user.has_perm(VIEW_API_KEYS):
        raise PermissionDenied
    key = get_object_or_404(ApiKey, pk=pk)
    today = timezone.now().astimezone(UTC).date()
    days = [today - timedelta(days=n) for n in range(CHART_DAYS - 1, -1, -1)]
    found = {row["day"]: row for row in usage_export(since=days[0], key_label=key.label)}
    rows = [
        found.get(
            day.isoformat(),
            {"day": day.isoformat(), "evaluations": 0, "questions": 0, "input_tokens": 0, "cached_tokens": 0},
        )
        for day in days
    ]
    chart = {
        "days": [row["day"] for row in rows],
        "evaluations": [row["evaluations"] for row in rows],
        "input_tokens": [row["input_tokens"] for row in rows],
    }
    context = {
        **site.each_context(request),
        "title": f"Usage of {key}",
        "key": key,
        "rows": rows[::-1],
        "chart": chart,
        "opts": ApiKey._meta,
        "totals": {
            name: sum(int(str(row[name])) for row in rows)
            for name in ("evaluations", "questions", "input_tokens", "cached_tokens")
        },
    }
    return TemplateResponse(request, "admin/evaluations/apikey/usage.html", context)

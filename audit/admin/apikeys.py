"""Issuing and revoking API keys.

An API key's secret exists only in the response to the form that issued it: it is rendered straight
into that page (never into a message cookie or the session) and only its SHA-256 is stored.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from audit.admin.display import STATE_COLOURS, badge_html
from audit.admin.usage import apikey_usage_view
from audit.keys import apikey_hash, apikey_revoke, apikey_secret_new
from audit.models import ApiKey


class KeyStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("active", "active"), ("revoked", "revoked"), ("expired", "expired")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        now = timezone.now()
        if self.value() == "active":
            return queryset.filter(revoked_at__isnull=True).exclude(expires_at__lte=now)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        if self.value() == "expired":
            return queryset.filter(revoked_at__isnull=True, expires_at__lte=now)
        return queryset


LIMIT_FIELDS = ("requests_per_minute", "tokens_per_minute", "concurrency")
"""The key's own limits (blank: the deployment's `OPENJEV_KEY_*` defaults)."""


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "label", "status", *LIMIT_FIELDS, "created_at", "expires_at", "last_used_at")
    list_filter = (KeyStatusFilter,)
    search_fields = ("name", "owner", "prefix")
    search_help_text = "Name, owner or prefix (without oj_)."
    actions = ("revoke_selected",)
    ordering = ("-created_at",)

    def get_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> Any:
        if obj is None:
            return ("name", "owner", "expires_at", *LIMIT_FIELDS)
        return (
            "label",
            "status",
            "name",
            "owner",
            "expires_at",
            *LIMIT_FIELDS,
            "created_at",
            "last_used_at",
            "revoked_at",
            "usage_link",
        )

    def get_readonly_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> Any:
        if obj is None:
            return ()
        readonly = ["label", "status", "created_at", "last_used_at", "revoked_at", "usage_link"]
        if obj.revoked_at is not None:  # a revoked key stays revoked: nothing left to edit
            readonly += ["name", "owner", "expires_at", *LIMIT_FIELDS]
        return readonly

    @admin.display(description="key")
    def label(self, obj: ApiKey) -> str:
        return f"{obj.label}…"

    @admin.display(description="status")
    def status(self, obj: ApiKey) -> SafeString:
        if obj.revoked_at is not None:
            state = "revoked"
        elif obj.expires_at is not None and obj.expires_at <= timezone.now():
            state = "expired"
        else:
            state = "active"
        return badge_html(text=state, colour=STATE_COLOURS[state])

    @admin.display(description="evaluations")
    def usage_link(self, obj: ApiKey) -> SafeString:
        url = reverse("admin:evaluations_evaluation_changelist") + f"?api_key_label={obj.label}"
        return format_html(
            '<a href="{}">evaluations made with this key</a> · <a href="{}">usage, last 30 days</a>',
            url,
            reverse("admin:evaluations_apikey_usage", args=[obj.pk]),
        )

    def get_urls(self) -> list[URLPattern]:
        usage = self.admin_site.admin_view(partial(apikey_usage_view, site=self.admin_site))
        return [path("<int:pk>/usage/", usage, name="evaluations_apikey_usage"), *super().get_urls()]

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if not change:
            prefix, secret = apikey_secret_new()
            obj.prefix, obj.secret_hash = prefix, apikey_hash(secret=secret)
            obj.issued_secret = secret  # type: ignore[attr-defined]  # lives only until response_add
        super().save_model(request, obj, form, change)

    def response_add(self, request: HttpRequest, obj: ApiKey, post_url_continue: str | None = None) -> HttpResponse:
        secret = getattr(obj, "issued_secret", None)
        if secret is None:  # pragma: no cover - save_model always sets it
            return super().response_add(request, obj, post_url_continue)
        context = {
            **self.admin_site.each_context(request),
            "title": "API key issued",
            "opts": self.opts,
            "key": obj,
            "secret": secret,
            "change_url": reverse("admin:evaluations_apikey_change", args=[obj.pk]),
            "list_url": reverse("admin:evaluations_apikey_changelist"),
        }
        response = TemplateResponse(request, "admin/evaluations/apikey/issued.html", context)
        response["Cache-Control"] = "no-store"
        return response

    @admin.action(description="Revoke selected API keys")
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        count = apikey_revoke(ids=queryset.values_list("pk", flat=True))
        self.message_user(request, f"Revoked {count} API key(s); they stop working at once.", messages.SUCCESS)

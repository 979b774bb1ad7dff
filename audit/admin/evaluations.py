"""The read-only evaluation audit: list, search, filters (`audit.admin.evaluation_filters`), one evaluation with
its per-question table, and the dashboard page.

Evaluations are evidence, so nobody edits or deletes them here (retention is the
`prune_evaluations` command).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.db.models import Min, QuerySet
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from audit.admin.dashboard import dashboard_view
from audit.admin.display import json_pretty, ms_text, probability_bars, status_badge_html, text_shown
from audit.admin.evaluation_filters import ApiKeyLabelFilter, ClassifierNameFilter, QuestionTypeFilter
from audit.models import Evaluation


@admin.register(Evaluation)
class EvaluationAdmin(admin.ModelAdmin):
    list_display = (
        "request_id",
        "created_at",
        "status_badge",
        "served_model",
        "classifier_name",
        "key_display",
        "question_count",
        "lowest_label_mass",
        "latency",
    )
    list_display_links = ("request_id",)
    list_filter = (
        "status_code",
        "api",
        "served_model",
        "backend",
        QuestionTypeFilter,
        ClassifierNameFilter,
        ("created_at", admin.DateFieldListFilter),
        ("api_key_label", ApiKeyLabelFilter),
        "store_level",
        "dataset_run",
    )
    search_fields = (
        "^request_id",
        "^api_key_label",
        "api_key__name",
        "api_key__owner",
        "=classifier_name",
        "=safety_identifier",
    )
    search_help_text = (
        "Request id (or its start), key prefix (oj_…), key name or owner, classifier name, "
        "end-user id (safety_identifier)."
    )
    date_hierarchy = "created_at"
    list_select_related = ("api_key",)
    list_per_page = 50
    show_full_result_count = False
    ordering = ("-created_at", "-id")
    readonly_fields = (
        "request_id",
        "created_at",
        "status_badge",
        "error_type",
        "error_message",
        "error_detail_pretty",
        "key_display",
        "api",
        "safety_identifier",
        "prompt_cache_key",
        "requested_model",
        "served_model",
        "backend",
        "classifier_link",
        "store_level",
        "question_count",
        "question_types",
        "input_tokens",
        "output_tokens",
        "prefix_tokens",
        "cached_tokens",
        "prepare",
        "prefill",
        "branches",
        "latency",
        "answers_table",
        "state_pretty",
        "questions_pretty",
        "image_count",
        "images_table",
    )
    fieldsets = (
        (None, {"fields": ("request_id", "created_at", "status_badge", "api", "key_display", "safety_identifier")}),
        ("Error", {"fields": ("error_type", "error_message", "error_detail_pretty"), "classes": ("collapse",)}),
        (
            "Model",
            {
                "fields": (
                    "requested_model",
                    "served_model",
                    "backend",
                    "classifier_link",
                    "store_level",
                    "prompt_cache_key",
                )
            },
        ),
        (
            "Usage and timings",
            {
                "fields": (
                    ("input_tokens", "output_tokens"),
                    ("prefix_tokens", "cached_tokens"),
                    ("prepare", "prefill", "branches"),
                    "latency",
                )
            },
        ),
        ("Answers", {"fields": ("question_count", "question_types", "answers_table")}),
        ("Request", {"fields": ("state_pretty", "questions_pretty", "image_count", "images_table")}),
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Evaluation | None = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Evaluation]:
        return super().get_queryset(request).annotate(min_label_mass=Min("answers__label_mass"))

    @admin.display(description="label mass", ordering="min_label_mass")
    def lowest_label_mass(self, obj: Evaluation) -> SafeString | str:
        """The lowest of the evaluation's answers: under the warning threshold it is shown in red."""
        mass = getattr(obj, "min_label_mass", None)
        if mass is None:
            return "—"
        low = mass < settings.OPENJEV.label_mass_warn
        return format_html('<span class="{}">{}</span>', "oj-low" if low else "oj-num", f"{mass:.3f}")

    def has_delete_permission(self, request: HttpRequest, obj: Evaluation | None = None) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        dashboard = self.admin_site.admin_view(partial(dashboard_view, site=self.admin_site))
        return [path("dashboard/", dashboard, name="evaluations_evaluation_dashboard"), *super().get_urls()]

    def get_fieldsets(self, request: HttpRequest, obj: Evaluation | None = None) -> Any:
        main, error, *rest = self.fieldsets
        if obj is not None and obj.status_code != 200:  # a failure: the error comes first, expanded
            return (main, ("Error", {"fields": error[1]["fields"]}), *rest)
        return (main, *rest)

    @admin.display(description="status", ordering="status_code")
    def status_badge(self, obj: Evaluation) -> SafeString:
        return status_badge_html(status=obj.status_code)

    @admin.display(description="API key", ordering="api_key_label")
    def key_display(self, obj: Evaluation) -> str:
        if not obj.api_key_label:
            return "—"
        if obj.api_key is not None:
            return f"{obj.api_key.name} ({obj.api_key_label})"
        return obj.api_key_label

    @admin.display(description="classifier")
    def classifier_link(self, obj: Evaluation) -> SafeString | str:
        if not obj.classifier_name:
            return "— (POST /v1/systemone)"
        if obj.classifier_id is not None:
            url = reverse("admin:evaluations_classifier_change", args=[obj.classifier_id])
            return format_html('<a href="{}">{}</a>', url, obj.classifier_name)
        return f"{obj.classifier_name} (no such classifier now)"

    @admin.display(description="latency", ordering="total_ms")
    def latency(self, obj: Evaluation) -> str:
        return ms_text(obj.total_ms)

    @admin.display(description="prepare")
    def prepare(self, obj: Evaluation) -> str:
        return ms_text(obj.prepare_ms)

    @admin.display(description="prefill")
    def prefill(self, obj: Evaluation) -> str:
        return ms_text(obj.prefill_ms)

    @admin.display(description="branches")
    def branches(self, obj: Evaluation) -> str:
        return ms_text(obj.branches_ms)

    @admin.display(description="state")
    def state_pretty(self, obj: Evaluation) -> SafeString:
        return json_pretty(value=obj.state)

    @admin.display(description="questions")
    def questions_pretty(self, obj: Evaluation) -> SafeString:
        return json_pretty(value=obj.questions)

    @admin.display(description="image metadata")
    def images_table(self, obj: Evaluation) -> SafeString | str:
        """One row per image: what is kept of it (never the bytes, never a URL)."""
        if not obj.images:
            return "—"
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
            (
                (i, m.get("source"), m.get("format") or "—", m.get("size") or "—", m.get("sha256") or "—")
                for i, m in enumerate(obj.images, 1)
            ),
        )
        return format_html(
            '<table class="oj-images"><tr><th>#</th><th>source</th><th>format</th><th>bytes</th>'
            "<th>SHA-256</th></tr>{}</table>",
            rows,
        )

    @admin.display(description="validation problems")
    def error_detail_pretty(self, obj: Evaluation) -> SafeString:
        return json_pretty(value=obj.error_detail) if obj.error_detail else mark_safe("—")

    @admin.display(description="per question")
    def answers_table(self, obj: Evaluation) -> SafeString:
        # A classification asks one question of each input text: show the text on its answer's row.
        inputs = (obj.state if isinstance(obj.state, list) else [obj.state]) if obj.classifier_name else []
        rows = []
        for answer in obj.answers.all():
            keys = answer.option_keys
            texts = answer.option_texts if isinstance(answer.option_texts, list) else None
            options = probability_bars(
                keys=keys,
                texts=[text_shown(t) for t in texts] if texts and len(texts) == len(keys) else [""] * len(keys),
                probabilities=[float(answer.probabilities.get(k, 0.0)) for k in keys],
                chosen=keys.index(answer.choice) if answer.choice in keys else None,
            )
            rows.append(
                {
                    "answer": answer,
                    "options": options,
                    "instructions": answer.instructions or None,
                    "input": inputs[answer.position] if answer.position < len(inputs) else None,
                }
            )
        if not rows:
            return mark_safe('<span class="oj-muted">no answers (the evaluation failed)</span>')
        return mark_safe(
            render_to_string(
                "admin/evaluations/evaluation/answers.html",
                {"rows": rows, "label_mass_warn": settings.OPENJEV.label_mass_warn},
            )
        )

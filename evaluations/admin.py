"""The operator's view: a read-only evaluation audit, a dashboard, issuing/revoking API keys, and the
classifiers served by `POST /v1/classify` (defined, validated and tried out here).

Evaluations are evidence, so nobody edits or deletes them here (retention is the
`prune_evaluations` command). An API key's secret exists only in the response to the form that
issued it: it is rendered straight into that page (never into a message cookie or the session) and
only its SHA-256 is stored.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any, ClassVar

from asgiref.sync import async_to_sync
from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models, transaction
from django.db.models import F, Min, QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from evaluations.classify import (
    Classified,
    classifier_cache_forget,
    classifier_problems,
    classifier_spec_of,
    classify_id_new,
    classify_run,
)
from evaluations.dashboard import dashboard_view
from evaluations.errors import ApiError, inference_error_to_api
from evaluations.keys import apikey_hash, apikey_revoke, apikey_secret_new
from evaluations.models import QUESTION_TYPE_CHOICES, ApiKey, Classifier, ClassifierLabel, Evaluation
from inference.errors import InferenceError

STATUS_COLOURS = {2: "#2e7d32", 4: "#b26a00", 5: "#c62828"}


def json_pretty(*, value: Any) -> SafeString:
    """Indented JSON in a scrollable block; escaped, so a state cannot inject markup."""
    if value is None:
        return format_html('<span class="oj-muted">{}</span>', "not stored")
    text = json.dumps(value, indent=2, ensure_ascii=False)
    return format_html('<pre class="oj-json">{}</pre>', text)


class QuestionTypeFilter(admin.SimpleListFilter):
    title = "question type"
    parameter_name = "question_type"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return list(QUESTION_TYPE_CHOICES)

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value in dict(QUESTION_TYPE_CHOICES):
            return queryset.filter(question_types__contains=value)
        return queryset


class ApiKeyLabelFilter(admin.AllValuesFieldListFilter):
    """Keys as recorded (also 'env' and keys deleted since), not only rows of the key table."""


class ClassifierNameFilter(admin.SimpleListFilter):
    """Classifications by classifier name as recorded (also classifiers renamed or deleted since)."""

    title = "classifier"
    parameter_name = "classifier"
    SYSTEMONE = "-"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        names = (Evaluation.objects.exclude(classifier_name="").order_by("classifier_name")
                 .values_list("classifier_name", flat=True).distinct())
        return [(self.SYSTEMONE, "none (/v1/systemone)"), *((n, n) for n in names)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value is None:
            return queryset
        return queryset.filter(classifier_name="" if value == self.SYSTEMONE else value)


@admin.register(Evaluation)
class EvaluationAdmin(admin.ModelAdmin):
    list_display = ("request_id", "created_at", "status_badge", "served_model", "classifier_name", "key_display",
                    "question_count", "lowest_label_mass", "latency")
    list_display_links = ("request_id",)
    list_filter = ("status_code", "served_model", "backend", QuestionTypeFilter, ClassifierNameFilter,
                   ("created_at", admin.DateFieldListFilter), ("api_key_label", ApiKeyLabelFilter), "store_level")
    search_fields = ("^request_id", "^api_key_label", "api_key__name", "api_key__owner", "=classifier_name")
    search_help_text = "Request id (or its start), key prefix (oj_…), key name or owner, classifier name."
    date_hierarchy = "created_at"
    list_select_related = ("api_key",)
    list_per_page = 50
    show_full_result_count = False
    ordering = ("-created_at", "-id")
    readonly_fields = (
        "request_id", "created_at", "status_badge", "error_type", "error_message", "error_detail_pretty",
        "key_display", "requested_model", "served_model", "backend", "classifier_link", "store_level",
        "question_count", "question_types", "input_tokens", "output_tokens", "prefix_tokens", "cached_tokens",
        "prepare", "prefill", "branches", "latency", "answers_table", "state_pretty", "questions_pretty",
    )
    fieldsets = (
        (None, {"fields": ("request_id", "created_at", "status_badge", "key_display")}),
        ("Error", {"fields": ("error_type", "error_message", "error_detail_pretty"), "classes": ("collapse",)}),
        ("Model", {"fields": ("requested_model", "served_model", "backend", "classifier_link", "store_level")}),
        ("Usage and timings", {"fields": (("input_tokens", "output_tokens"), ("prefix_tokens", "cached_tokens"),
                                          ("prepare", "prefill", "branches"), "latency")}),
        ("Answers", {"fields": ("question_count", "question_types", "answers_table")}),
        ("Request", {"fields": ("state_pretty", "questions_pretty")}),
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
        colour = STATUS_COLOURS.get(obj.status_code // 100, "#555")
        return format_html('<span class="oj-status" style="background:{}">{}</span>', colour, obj.status_code)

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
        return _ms(obj.total_ms)

    @admin.display(description="prepare")
    def prepare(self, obj: Evaluation) -> str:
        return _ms(obj.prepare_ms)

    @admin.display(description="prefill")
    def prefill(self, obj: Evaluation) -> str:
        return _ms(obj.prefill_ms)

    @admin.display(description="branches")
    def branches(self, obj: Evaluation) -> str:
        return _ms(obj.branches_ms)

    @admin.display(description="state")
    def state_pretty(self, obj: Evaluation) -> SafeString:
        return json_pretty(value=obj.state)

    @admin.display(description="questions")
    def questions_pretty(self, obj: Evaluation) -> SafeString:
        return json_pretty(value=obj.questions)

    @admin.display(description="validation problems")
    def error_detail_pretty(self, obj: Evaluation) -> SafeString:
        return json_pretty(value=obj.error_detail) if obj.error_detail else mark_safe("—")

    @admin.display(description="per question")
    def answers_table(self, obj: Evaluation) -> SafeString:
        questions: dict[str, Any] = obj.questions if isinstance(obj.questions, dict) else {}
        # A classification asks one question of each input text: show the text on its answer's row.
        inputs = (obj.state if isinstance(obj.state, list) else [obj.state]) if obj.classifier_name else []
        rows = []
        for answer in obj.answers.all():
            question = questions.get(answer.question_id)
            question = question if isinstance(question, dict) else {}
            options = []
            for key in answer.option_keys:
                p = float(answer.probabilities.get(key, 0.0))
                options.append({"key": key, "text": _option_text(question, answer.type, key), "p": p,
                                "width": f"{max(0.0, min(1.0, p)) * 100:.1f}",
                                "chosen": _is_chosen(answer, key)})
            rows.append({"answer": answer, "options": options,
                         "instructions": question.get("instructions") if question else None,
                         "input": inputs[answer.position] if answer.position < len(inputs) else None})
        if not rows:
            return mark_safe('<span class="oj-muted">no answers (the evaluation failed)</span>')
        return mark_safe(render_to_string("admin/evaluations/evaluation/answers.html",
                                          {"rows": rows, "label_mass_warn": settings.OPENJEV.label_mass_warn}))


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} ms"


def _option_text(question: dict[str, Any], kind: str, key: str) -> str:
    """What the option meant, when the question text was stored (level `full`)."""
    criteria = question.get("criteria")
    value: Any = None
    if kind == "score" and isinstance(criteria, list) and key.isdigit() and int(key) < len(criteria):
        value = criteria[int(key)]
    elif kind in ("choice", "noul") and isinstance(criteria, dict):
        value = criteria.get(key)
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _is_chosen(answer: Any, key: str) -> bool:
    if answer.type == "choice":
        return bool(key == answer.choice)
    best = max(answer.option_keys, key=lambda k: float(answer.probabilities.get(k, 0.0)))
    return bool(key == best)


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


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "label", "status", "created_at", "expires_at", "last_used_at")
    list_filter = (KeyStatusFilter,)
    search_fields = ("name", "owner", "prefix")
    search_help_text = "Name, owner or prefix (without oj_)."
    actions = ("revoke_selected",)
    ordering = ("-created_at",)

    def get_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> Any:
        if obj is None:
            return ("name", "owner", "expires_at")
        return ("label", "status", "name", "owner", "expires_at", "created_at", "last_used_at", "revoked_at",
                "usage_link")

    def get_readonly_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> Any:
        if obj is None:
            return ()
        readonly = ["label", "status", "created_at", "last_used_at", "revoked_at", "usage_link"]
        if obj.revoked_at is not None:  # a revoked key stays revoked: nothing left to edit
            readonly += ["name", "owner", "expires_at"]
        return readonly

    @admin.display(description="key")
    def label(self, obj: ApiKey) -> str:
        return f"{obj.label}…"

    @admin.display(description="status")
    def status(self, obj: ApiKey) -> SafeString:
        if obj.revoked_at is not None:
            text, colour = "revoked", "#c62828"
        elif obj.expires_at is not None and obj.expires_at <= timezone.now():
            text, colour = "expired", "#b26a00"
        else:
            text, colour = "active", "#2e7d32"
        return format_html('<span class="oj-status" style="background:{}">{}</span>', colour, text)

    @admin.display(description="evaluations")
    def usage_link(self, obj: ApiKey) -> SafeString:
        url = reverse("admin:evaluations_evaluation_changelist") + f"?api_key_label={obj.label}"
        return format_html('<a href="{}">evaluations made with this key</a>', url)

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


# ---------------------------------------------------------------------------------------------------
# Classifiers (POST /v1/classify)
# ---------------------------------------------------------------------------------------------------


class ClassifierForm(forms.ModelForm):
    class Meta:
        model = Classifier
        fields = ("name", "type", "description", "instructions")

    def clean_name(self) -> str:
        """A classifier's name shares `GET /v1/models` with the language model's names, so it may not be one."""
        name: str = self.cleaned_data["name"]
        config = settings.OPENJEV
        if name in (config.model_alias, config.model, config.served_model_name) or name.startswith("jev-"):
            raise ValidationError("This name belongs to the language model (POST /v1/systemone, and any jev-* "
                                  "alias); choose another.")
        return name


class ClassifierLabelFormSet(BaseInlineFormSet):
    """The label set as a whole, with the API's limits: 2 to `OPENJEV_MAX_ANSWERS` distinct labels (a noul
    classifier: only `true`/`false`, to reword them)."""

    def clean(self) -> None:
        super().clean()
        if any(self.errors):
            return
        names = [f.cleaned_data["name"] for f in self.forms
                 if f.cleaned_data and not f.cleaned_data.get("DELETE") and f.cleaned_data.get("name")]
        problems = classifier_problems(type=self.instance.type, labels=names,
                                       max_answers=settings.OPENJEV.max_answers)
        if problems:
            raise ValidationError([problem[0].upper() + problem[1:] + "." for problem in problems])


class ClassifierLabelInline(admin.TabularInline):
    model = ClassifierLabel
    formset = ClassifierLabelFormSet
    fields = ("position", "name", "description")
    extra = 3
    formfield_overrides: ClassVar[dict[Any, dict[str, Any]]] = {
        models.TextField: {"widget": forms.Textarea(attrs={"rows": 1, "cols": 60})},
    }

    def get_max_num(self, request: HttpRequest, obj: Classifier | None = None, **kwargs: Any) -> int:
        return settings.OPENJEV.max_answers


class ClassifierTryForm(forms.Form):
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 4, "cols": 90}), strip=False,
                           help_text="Classified exactly as POST /v1/classify would (and stored like any request).")


@admin.register(Classifier)
class ClassifierAdmin(admin.ModelAdmin):
    form = ClassifierForm
    inlines = (ClassifierLabelInline,)
    list_display = ("name", "type", "labels_summary", "description", "updated_at", "usage_link")
    list_filter = ("type",)
    search_fields = ("name", "description")
    readonly_fields = ("created_at", "updated_at", "usage_link")
    fieldsets = (
        (None, {"fields": ("name", "type", "description", "instructions")}),
        ("History", {"fields": ("created_at", "updated_at", "usage_link"), "classes": ("collapse",)}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Classifier]:
        return super().get_queryset(request).prefetch_related("labels")

    def get_fieldsets(self, request: HttpRequest, obj: Classifier | None = None) -> Any:
        return self.fieldsets if obj is not None else self.fieldsets[:1]

    @admin.display(description="labels")
    def labels_summary(self, obj: Classifier) -> str:
        names = [label.name for label in obj.labels.all()]
        if obj.type == "noul":
            return "true, false"
        return ", ".join(names) if len(names) <= 8 else ", ".join(names[:8]) + f", … ({len(names)})"

    @admin.display(description="classifications")
    def usage_link(self, obj: Classifier) -> SafeString:
        url = reverse("admin:evaluations_evaluation_changelist") + f"?classifier={obj.name}"
        return format_html('<a href="{}">classifications</a>', url)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        """Renumber the labels 1..n in their order (blank positions last), then drop the API's cache."""
        super().save_related(request, form, formsets, change)
        labels = list(form.instance.labels.order_by(F("position").asc(nulls_last=True), "id"))
        for position, label in enumerate(labels, start=1):
            label.position = position
        ClassifierLabel.objects.bulk_update(labels, ["position"])
        transaction.on_commit(classifier_cache_forget)  # the admin saves in a transaction: forget once it is visible

    def get_urls(self) -> list[URLPattern]:
        try_it = self.admin_site.admin_view(self.try_view)
        return [path("<path:object_id>/try/", try_it, name="evaluations_classifier_try"), *super().get_urls()]

    def try_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Classify a text with this classifier as saved (through `classify_run`, so it is also stored)."""
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)  # type: ignore[attr-defined]
        if not self.has_view_permission(request, obj):
            raise PermissionDenied
        form = ClassifierTryForm(request.POST if request.method == "POST" else None)
        spec = classifier_spec_of(row=obj)
        result: dict[str, Any] | None = None
        error = None
        if request.method == "POST" and form.is_valid():
            try:
                classified: Classified = async_to_sync(classify_run)(
                    data={"model": obj.name, "input": form.cleaned_data["text"]}, request_id=classify_id_new(),
                    api_key="admin", classifier=spec)
                result = _try_result(classified=classified, texts=_label_texts(spec.definition, spec.labels))
            except ApiError as exc:
                error = f"{exc.status} {exc.error_type}: {exc.message}"
            except InferenceError as exc:
                api = inference_error_to_api(exc)
                error = f"{api.status} {api.error_type}: {api.message}"
        context = {
            **self.admin_site.each_context(request),
            "title": f"Try {obj.name}",
            "opts": self.opts,
            "original": obj,
            "form": form,
            "spec": spec,
            "result": result,
            "error": error,
            "change_url": reverse("admin:evaluations_classifier_change", args=[obj.pk]),
        }
        return TemplateResponse(request, "admin/evaluations/classifier/try.html", context)


def _label_texts(definition: dict[str, Any], labels: tuple[str, ...]) -> list[str]:
    """What the model reads for each label (empty where that is the label itself or a default)."""
    criteria = definition.get("criteria")
    if isinstance(criteria, list):
        return ["" if text == name else str(text) for name, text in zip(labels, criteria, strict=False)]
    if isinstance(criteria, dict):
        return [str(criteria.get(name) or "") for name in labels]
    return [""] * len(labels)


def _try_result(*, classified: Classified, texts: list[str]) -> dict[str, Any]:
    item = classified.items[0]
    rows = [{"label": label, "text": text, "p": p, "width": f"{max(0.0, min(1.0, p)) * 100:.1f}",
             "chosen": label == item.label}
            for label, text, p in zip(classified.classifier.labels, texts, item.probs, strict=False)]
    return {"label": item.label, "rows": rows, "body": json.dumps(classified.body(), indent=2, ensure_ascii=False),
            "request_id": classified.request_id,
            "audit_url": reverse("admin:evaluations_evaluation_changelist") + f"?q={classified.request_id}"}

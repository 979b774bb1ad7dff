"""The classifiers served by `POST /v1/classify`: defined and validated here, and tried out on a text.

Saving one (or its labels) drops the API's classifier cache through the signal receivers
(`audit.signals`), once the admin's transaction is committed.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from asgiref.sync import async_to_sync
from django import forms
from django.conf import settings
from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models
from django.db.models import F, QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from api.classify.format import FORMAT
from api.classify.registry import classifier_problems, classifier_spec_of
from api.classify.render import classified_render
from api.classify.service import Classified, classify_run
from api.plumbing.api_error import ApiError
from api.plumbing.bodies import Body
from api.plumbing.error_responses import api_error_of
from api.plumbing.requestids import request_id_assign
from audit.admin.display import probability_bars
from audit.callers import Caller
from audit.models import Classifier, ClassifierLabel
from inference.errors import InferenceError
from serving.config import language_model_named

ADMIN_CALLER = Caller(label="admin")
"""Who a classification tried out here is recorded as."""


class ClassifierForm(forms.ModelForm):
    class Meta:
        model = Classifier
        fields = ("name", "type", "description", "instructions")

    def clean_name(self) -> str:
        """A classifier's name shares `GET /v1/models` with the language model's names, so it may not be one."""
        name: str = self.cleaned_data["name"]
        if language_model_named(name=name, names=settings.OPENJEV.language_model_names):
            raise ValidationError(
                "This name belongs to the language model (POST /v1/systemone, and any jev-* alias); choose another."
            )
        return name


class ClassifierLabelFormSet(BaseInlineFormSet):
    """The label set as a whole, with the API's limits: 2 to `OPENJEV_MAX_ANSWERS` distinct labels (a noul
    classifier: only `true`/`false`, to reword them)."""

    def clean(self) -> None:
        super().clean()
        if any(self.errors):
            return
        names = [
            f.cleaned_data["name"]
            for f in self.forms
            if f.cleaned_data and not f.cleaned_data.get("DELETE") and f.cleaned_data.get("name")
        ]
        problems = classifier_problems(type=self.instance.type, labels=names, max_answers=settings.OPENJEV.max_answers)
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
    text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4, "cols": 90}),
        strip=False,
        help_text="Classified exactly as POST /v1/classify would (and stored like any request).",
    )


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
        """Renumber the labels 1..n in their order (blank positions last)."""
        super().save_related(request, form, formsets, change)
        labels = list(form.instance.labels.order_by(F("position").asc(nulls_last=True), "id"))
        for position, label in enumerate(labels, start=1):
            label.position = position
        ClassifierLabel.objects.bulk_update(labels, ["position"])

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
                    body=Body(data={"model": obj.name, "input": form.cleaned_data["text"]}, size=0),
                    request_id=request_id_assign(path=FORMAT.path),
                    caller=ADMIN_CALLER,
                    classifier=spec,
                )
                result = _try_result(classified=classified, texts=_label_texts(spec.definition, spec.labels))
            except (ApiError, InferenceError) as exc:
                api = api_error_of(exc)
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
    labels = classified.classifier.labels
    rows = probability_bars(keys=labels, texts=texts, probabilities=item.probs, chosen=labels.index(item.label))
    body = json.dumps(classified_render(classified=classified), indent=2, ensure_ascii=False)
    return {
        "label": item.label,
        "rows": rows,
        "body": body,
        "request_id": classified.request_id,
        "audit_url": reverse("admin:evaluations_evaluation_changelist") + f"?q={classified.request_id}",
    }

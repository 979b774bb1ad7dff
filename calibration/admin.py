"""Calibrations (their fit report and reliability before/after, switched on and off here), dataset runs
(metrics and confusion matrices), and labelling a stored answer by hand.

Charts are drawn by the vendored uPlot, as on the dashboard, so the admin works offline. Activating a
calibration drops the API's calibration cache through the signal receivers (`audit.signals`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from audit.models import Calibration, DatasetRun, EvaluationAnswer
from calibration.fitting import calibration_activate
from inference.metrics import ECE_BINS

METRICS = (("accuracy", "accuracy"), ("log_loss", "log loss"), ("brier", "Brier"), ("ece", "ECE (10 bins)"))


def reliability_chart(
    *, chart_id: str, title: str, series: Sequence[tuple[str, Sequence[Sequence[float]]]]
) -> dict[str, Any]:
    """Chart data for `_reliability.html`: x is each bin's centre, a series' value its accuracy (None
    where the bin is empty); `series` are (label, reliability bins as `inference.metrics` gives them)."""
    x = [(b + 0.5) / ECE_BINS for b in range(ECE_BINS)]
    columns = []
    for label, bins in series:
        values: list[float | None] = [None] * ECE_BINS
        for confidence, accuracy, _ in bins:
            values[min(ECE_BINS - 1, int(confidence * ECE_BINS))] = accuracy
        columns.append({"label": label, "values": values})
    return {"id": chart_id, "title": title, "data": {"x": x, "series": columns}}


def charts_html(*, charts: list[dict[str, Any]]) -> SafeString:
    return mark_safe(render_to_string("admin/evaluations/_reliability.html", {"charts": charts}))


def _figure(value: Any) -> str:
    return "—" if value is None else f"{value:.4f}"


def confusion_html(*, keys: Sequence[str], matrix: Sequence[Sequence[int]]) -> SafeString:
    """Rows: the true option; columns: the answered one; the diagonal (right) in bold."""
    head = format_html_join("", "<th>{}</th>", ((k,) for k in keys))
    rows = format_html_join(
        "",
        "<tr><th>{}</th>{}</tr>",
        (
            (
                key,
                format_html_join(
                    "",
                    "<td class='oj-num'>{}</td>",
                    ((format_html("<strong>{}</strong>", c) if i == j else c,) for j, c in enumerate(row)),
                ),
            )
            for i, (key, row) in enumerate(zip(keys, matrix, strict=True))
        ),
    )
    return format_html(
        "<table><thead><tr><th>true \\ answered</th>{}</tr></thead><tbody>{}</tbody></table>", head, rows
    )


@admin.register(Calibration)
class CalibrationAdmin(admin.ModelAdmin):
    list_display = ("subject", "method", "temperature", "labels", "held_out_log_loss", "active", "created_at")
    list_filter = ("active", "method", "question_type")
    search_fields = ("=key", "subject")
    actions = ("activate", "deactivate")
    readonly_fields = (
        "key",
        "subject",
        "question_type",
        "option_keys",
        "method",
        "temperature",
        "biases",
        "active",
        "created_at",
        "report_table",
        "reliability",
        "label_keys",
    )
    fieldsets = (
        (None, {"fields": ("subject", "key", "question_type", "option_keys", "active", "created_at")}),
        ("Tenants", {"fields": ("label_keys", "applies_to")}),
        ("Fit", {"fields": ("method", "temperature", "biases", "report_table", "reliability")}),
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # fitted by `manage.py calibrate`, never typed in

    @admin.display(description="labels")
    def labels(self, obj: Calibration) -> int:
        return int(obj.report.get("n", 0))

    @admin.display(description="held-out log loss (before → after)")
    def held_out_log_loss(self, obj: Calibration) -> str:
        return f"{_figure(obj.report['before']['log_loss'])} → {_figure(obj.report['after']['log_loss'])}"

    @admin.display(description="report (held-out split)")
    def report_table(self, obj: Calibration) -> SafeString:
        r = obj.report
        rows = format_html_join(
            "",
            "<tr><th>{}</th><td class='oj-num'>{}</td><td class='oj-num'>{}</td></tr>",
            ((label, _figure(r["before"][name]), _figure(r["after"][name])) for name, label in METRICS),
        )
        return format_html(
            "<p>{} labels: fitted on {}, judged on {} held out (a seeded split).</p>"
            "<table><thead><tr><th></th><th>before</th><th>after</th></tr></thead><tbody>{}</tbody>"
            "</table>",
            r["n"],
            r["n_fit"],
            r["n_held_out"],
            rows,
        )

    @admin.display(description="reliability (held-out split)")
    def reliability(self, obj: Calibration) -> SafeString:
        return charts_html(
            charts=[
                reliability_chart(
                    chart_id=f"oj-reliability-{obj.pk}",
                    title="Accuracy per confidence bin, before and after",
                    series=[("before", obj.report["reliability_before"]), ("after", obj.report["reliability_after"])],
                )
            ]
        )

    @admin.action(description="Activate (serve it; replaces the active one of its question)")
    def activate(self, request: HttpRequest, queryset: QuerySet[Calibration]) -> None:
        chosen: dict[str, Calibration] = {}
        for calibration in queryset.order_by("created_at"):
            chosen[calibration.key] = calibration  # the newest of each key wins
        for calibration in chosen.values():
            calibration_activate(calibration=calibration)
        self.message_user(request, f"{len(chosen)} calibration(s) active", messages.SUCCESS)

    @admin.action(description="Deactivate (serve uncalibrated answers)")
    def deactivate(self, request: HttpRequest, queryset: QuerySet[Calibration]) -> None:
        for calibration in queryset.filter(active=True):
            calibration.active = False
            calibration.save(update_fields=["active"])  # a save, so the API's cache is dropped
        self.message_user(request, "deactivated", messages.SUCCESS)


@admin.register(DatasetRun)
class DatasetRunAdmin(admin.ModelAdmin):
    list_display = ("name", "item_count", "accuracy", "ece", "created_at", "finished_at")
    search_fields = ("name",)
    readonly_fields = ("name", "source", "created_at", "finished_at", "item_count", "metrics_table", "questions")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # made by `manage.py evaluate_dataset`

    def _metric(self, obj: DatasetRun, name: str) -> str:
        return _figure((obj.metrics or {}).get(name))

    @admin.display(description="accuracy")
    def accuracy(self, obj: DatasetRun) -> str:
        return self._metric(obj, "accuracy")

    @admin.display(description="ECE")
    def ece(self, obj: DatasetRun) -> str:
        return self._metric(obj, "ece")

    @admin.display(description="metrics")
    def metrics_table(self, obj: DatasetRun) -> SafeString:
        if not obj.metrics:
            return format_html('<span class="oj-muted">{}</span>', "not finished")
        link = reverse("admin:evaluations_evaluation_changelist") + f"?dataset_run__id__exact={obj.pk}"
        rows = format_html_join(
            "",
            "<tr><th>{}</th><td class='oj-num'>{}</td></tr>",
            ((label, self._metric(obj, name)) for name, label in (*METRICS, ("label_mass", "mean label mass"))),
        )
        return format_html(
            "<p>{} answered items (<a href='{}'>their evaluations</a>)</p><table>{}</table>",
            obj.metrics["n"],
            link,
            rows,
        )

    @admin.display(description="per question")
    def questions(self, obj: DatasetRun) -> SafeString:
        found = (obj.metrics or {}).get("questions", [])
        tables = format_html_join(
            "",
            "<h3>{} ({}, {} items)</h3>{}",
            (
                (q["question_id"], q["type"], q["n"], confusion_html(keys=q["option_keys"], matrix=q["confusion"]))
                for q in found
            ),
        )
        charts = [
            reliability_chart(
                chart_id=f"oj-run-{obj.pk}-{i}",
                title=f"Reliability of {q['question_id']}",
                series=[("as served", q["reliability"])],
            )
            for i, q in enumerate(found)
        ]
        return format_html("{}{}", tables, charts_html(charts=charts) if charts else "")


class AnswerLabelForm(forms.ModelForm):
    """The label as one of the answer's own options (blank: unlabelled)."""

    class Meta:
        model = EvaluationAnswer
        fields = ("label",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        keys = list(self.instance.option_keys or [])
        self.fields["label"] = forms.ChoiceField(
            choices=[("", "— unlabelled —"), *((k, k) for k in keys)], required=False, help_text="The true option."
        )

    def clean_label(self) -> str | None:
        return self.cleaned_data["label"] or None


@admin.register(EvaluationAnswer)
class AnswerLabelAdmin(admin.ModelAdmin):
    """Answers, to label by hand; everything but the label is read-only (evaluations are evidence)."""

    form = AnswerLabelForm
    list_display = ("evaluation", "question_id", "type", "choice", "label", "labelled_at")
    list_filter = ("type", ("label", admin.EmptyFieldListFilter))
    search_fields = ("^evaluation__request_id", "=question_id", "=question_key")
    list_select_related = ("evaluation",)
    readonly_fields = (
        "evaluation",
        "question_id",
        "question_key",
        "type",
        "probabilities",
        "uncalibrated_probabilities",
        "calibration",
        "labelled_at",
    )
    fields = (*readonly_fields[:-1], "label", "labelled_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: EvaluationAnswer | None = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: EvaluationAnswer, form: forms.ModelForm, change: bool) -> None:
        obj.labelled_at = timezone.now() if obj.label else None
        super().save_model(request, obj, form, change)

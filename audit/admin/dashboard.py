"""The admin dashboard: volume, error rate and latency percentiles over the last day and week.

Percentiles are nearest-rank (`percentile_disc`) so SQLite and PostgreSQL report the same figure:
PostgreSQL computes them in one aggregate, SQLite (which has no ordered-set aggregates) with one
indexed `ORDER BY ... LIMIT 1 OFFSET k` per percentile. Everything is computed from stored rows,
so with `OPENJEV_STORE_EVALUATIONS=off` the page is empty by design.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.admin import AdminSite
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.db.models import Aggregate, Count, FloatField, Q, QuerySet, Sum
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone

from audit.models import Evaluation, EvaluationAnswer
from audit.permissions import VIEW_API_KEYS, VIEW_EVALUATIONS
from audit.storage.store import storage_stats

PERCENTILES = (0.5, 0.9, 0.99)
WINDOWS = (("Last 24 hours", timedelta(days=1)), ("Last 7 days", timedelta(days=7)))


class PercentileDisc(Aggregate):
    """PostgreSQL's nearest-rank percentile; the fraction is ours (a float), never user input."""

    function = "percentile_disc"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression: str, *, fraction: float) -> None:
        super().__init__(expression, fraction=repr(float(fraction)))


@dataclass(frozen=True)
class WindowStats:
    title: str
    since: Any
    total: int
    answered: int
    invalid: int
    overloaded: int
    failed: int
    error_rate: float | None
    server_error_rate: float | None
    latency_ms: dict[str, float | None]
    prefill_p50_ms: float | None
    input_tokens: int
    by_status: list[dict[str, Any]]
    by_model: list[dict[str, Any]]
    by_key: list[dict[str, Any]]
    classifications: int = 0
    by_classifier: list[dict[str, Any]] = field(default_factory=list)
    label_mass_p50: float | None = None
    label_mass_low_share: float | None = None
    """Share of answers whose label mass is under the warning threshold."""
    refusals: int = 0
    """Answers sent as refusals (`POST /v1/decisions`, `OPENJEV_REFUSAL_LABEL_MASS`)."""
    by_api: list[dict[str, Any]] = field(default_factory=list)

    @property
    def label_mass_low_pct(self) -> float | None:
        return None if self.label_mass_low_share is None else 100.0 * self.label_mass_low_share

    @property
    def error_rate_pct(self) -> float | None:
        return None if self.error_rate is None else 100.0 * self.error_rate

    @property
    def server_error_rate_pct(self) -> float | None:
        return None if self.server_error_rate is None else 100.0 * self.server_error_rate


def percentiles_compute(
    *, queryset: QuerySet[Any], field: str, fractions: tuple[float, ...] = PERCENTILES
) -> dict[str, float | None]:
    """Nearest-rank percentiles of a numeric column over `queryset`, labelled p50, p90, ..."""
    queryset = queryset.filter(**{f"{field}__isnull": False})
    labels = [f"p{round(f * 100):g}" for f in fractions]
    if connection.vendor == "postgresql":
        result = queryset.aggregate(
            **{label: PercentileDisc(field, fraction=f) for label, f in zip(labels, fractions, strict=True)}
        )
        return {label: result[label] for label in labels}
    n = queryset.count()
    if n == 0:
        return dict.fromkeys(labels)
    ordered = queryset.order_by(field).values_list(field, flat=True)
    return {label: ordered[max(0, math.ceil(f * n) - 1)] for label, f in zip(labels, fractions, strict=True)}


def window_stats_compute(*, title: str, since: Any, keys_shown: bool = True) -> WindowStats:
    """The window's figures; `keys_shown=False` leaves the volumes by API key (key names) out."""
    rows = Evaluation.objects.filter(created_at__gte=since)
    counts = rows.aggregate(
        total=Count("id"),
        answered=Count("id", filter=Q(status_code=200)),
        invalid=Count("id", filter=Q(status_code__gte=400, status_code__lt=500)),
        overloaded=Count("id", filter=Q(status_code=529)),
        failed=Count("id", filter=Q(status_code__gte=500) & ~Q(status_code=529)),
        input_tokens=Sum("input_tokens"),
        classifications=Count("id", filter=~Q(classifier_name="")),
    )
    total = counts["total"]
    answered = rows.filter(status_code=200)
    answers = EvaluationAnswer.objects.filter(evaluation__created_at__gte=since, label_mass__isnull=False)
    low = Q(label_mass__lt=settings.OPENJEV.label_mass_warn)
    masses = answers.aggregate(n=Count("id"), low=Count("id", filter=low), refused=Count("id", filter=Q(refused=True)))
    return WindowStats(
        title=title,
        since=since,
        total=total,
        answered=counts["answered"],
        invalid=counts["invalid"],
        overloaded=counts["overloaded"],
        failed=counts["failed"],
        error_rate=(total - counts["answered"]) / total if total else None,
        server_error_rate=(counts["failed"] + counts["overloaded"]) / total if total else None,
        latency_ms=percentiles_compute(queryset=answered, field="total_ms"),
        prefill_p50_ms=percentiles_compute(queryset=answered, field="prefill_ms", fractions=(0.5,))["p50"],
        input_tokens=counts["input_tokens"] or 0,
        by_status=[dict(r) for r in rows.values("status_code").annotate(n=Count("id")).order_by("-n", "status_code")],
        by_model=[
            dict(r)
            for r in rows.exclude(served_model="")
            .values("served_model")
            .annotate(n=Count("id"))
            .order_by("-n", "served_model")[:10]
        ],
        by_key=[
            dict(r)
            for r in rows.exclude(api_key_label="")
            .values("api_key_label", "api_key__name")
            .annotate(n=Count("id"))
            .order_by("-n", "api_key_label")[:10]
        ]
        if keys_shown
        else [],
        classifications=counts["classifications"],
        label_mass_p50=percentiles_compute(queryset=answers, field="label_mass", fractions=(0.5,))["p50"],
        label_mass_low_share=masses["low"] / masses["n"] if masses["n"] else None,
        refusals=masses["refused"],
        by_api=[dict(r) for r in rows.values("api").annotate(n=Count("id")).order_by("-n", "api")],
        by_classifier=[
            dict(r)
            for r in rows.exclude(classifier_name="")
            .values("classifier_name")
            .annotate(n=Count("id"))
            .order_by("-n", "classifier_name")[:10]
        ],
    )


def dashboard_view(request: HttpRequest, *, site: AdminSite) -> HttpResponse:
    """The admin page (mounted by `EvaluationAdmin.get_urls`, behind `admin_view`, which admits any staff user):
    it shows the stored evaluations, so it needs the view permission on evaluations, as their list does; the
    volumes by API key name the keys, so they are shown only with the view permission on keys too."""
    if not request.user.has_perm(VIEW_EVALUATIONS):
        raise PermissionDenied
    keys_shown = request.user.has_perm(VIEW_API_KEYS)
    now = timezone.now()
    windows = [window_stats_compute(title=title, since=now - span, keys_shown=keys_shown) for title, span in WINDOWS]
    context = {
        **site.each_context(request),
        "title": "Evaluations dashboard",
        "windows": windows,
        "storage": storage_stats(),
        "level": settings.OPENJEV.store_evaluations,
        "label_mass_warn": settings.OPENJEV.label_mass_warn,
        "opts": Evaluation._meta,
        "now": now,
        "keys_shown": keys_shown,
    }
    return TemplateResponse(request, "admin/evaluations/dashboard.html", context)

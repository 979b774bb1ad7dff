"""The evaluation list's filters on what each evaluation recorded (its question types, key label, classifier
name), so keys and classifiers deleted or renamed since still filter their evaluations.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from audit.models import QUESTION_TYPE_CHOICES, Evaluation


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
        names = (
            Evaluation.objects.exclude(classifier_name="")
            .order_by("classifier_name")
            .values_list("classifier_name", flat=True)
            .distinct()
        )
        return [(self.SYSTEMONE, "none (/v1/systemone)"), *((n, n) for n in names)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value is None:
            return queryset
        return queryset.filter(classifier_name="" if value == self.SYSTEMONE else value)

"""Fitting a calibration from labelled stored answers, and switching one on.

The labelled answers of one question key (any endpoint) or of one saved classifier are fitted as they
were before any calibration (`uncalibrated_probabilities` where one was applied), so refitting never
fits a calibration on top of itself. The math and the held-out report are the core's
(`inference.vector_scaling`); this module picks the rows, refuses too few labels, and stores the result.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, QuerySet

from audit.models import Calibration, EvaluationAnswer
from calibration.applied import classifier_key
from calibration.labelled import answer_scored, json_finite
from inference.vector_scaling import calibration_fit


class FitRefused(Exception):
    """Why a fit cannot be made, in words for the operator."""


def labelled_answers(
    *, question_key: str | None = None, classifier: str | None = None, keys: Sequence[str] | None = None
) -> QuerySet[EvaluationAnswer]:
    """The answered, labelled answers of a question key or of a classifier, oldest first; with `keys`, only
    those of evaluations made with these API keys (their labels; '' for calls without a key)."""
    answers = EvaluationAnswer.objects.filter(label__isnull=False, evaluation__status_code=200)
    if classifier is not None:
        answers = answers.filter(evaluation__classifier_name=classifier)
    else:
        answers = answers.filter(question_key=question_key)
    if keys is not None:
        answers = answers.filter(evaluation__api_key_label__in=list(keys))
    return answers.order_by("id")


def labelled_keys_list() -> list[dict[str, Any]]:
    """Question keys with labels, most labelled first: what there is to fit."""
    return [
        dict(row)
        for row in EvaluationAnswer.objects.filter(label__isnull=False)
        .values("question_key", "type")
        .annotate(labels=Count("id"))
        .order_by("-labels", "question_key")
    ]


def calibration_fit_store(
    *,
    question_key: str | None = None,
    classifier: str | None = None,
    vector: bool = False,
    min_labels: int | None = None,
    keys: Sequence[str] | None = None,
    applies_to: Sequence[str] | None = None,
    everyone: bool = False,
) -> Calibration:
    """Fit and store an inactive calibration; FitRefused below the minimum number of labels. `keys`: fit from
    these API keys' labels only; `applies_to`: serve it to these keys' calls only; by default, to the keys whose
    labels it was fitted on, so one tenant's labels never change another tenant's answers (`everyone`: every
    caller's, an operator's explicit choice). The calibration records how many labels each key gave.

    A classifier's labels may have changed over time: only answers with its latest option keys count.
    """
    if (question_key is None) == (classifier is None):
        raise FitRefused("name either a question key or a classifier")
    needed = settings.OPENJEV.calibration_min_labels if min_labels is None else min_labels
    rows = list(
        labelled_answers(question_key=question_key, classifier=classifier, keys=keys).select_related("evaluation")
    )
    subject = f"classifier {classifier!r}" if classifier is not None else f"question key {question_key}"
    if rows:
        latest = rows[-1].option_keys
        rows = [r for r in rows if r.option_keys == latest]
    if len(rows) < needed:
        raise FitRefused(
            f"{subject} has {len(rows)} labelled answer(s); a fit needs at least {needed} "
            f"(OPENJEV_CALIBRATION_MIN_LABELS), 30 % of them held out to judge it. Label more answers "
            f"with POST /v1/feedback or manage.py evaluate_dataset."
        )
    calibrator, report = calibration_fit(
        items=[answer_scored(answer=r, uncalibrated=True) for r in rows], vector=vector
    )
    last = rows[-1]
    label_keys = Counter(r.evaluation.api_key_label for r in rows).most_common()
    words = _instructions_of(answer=last) if classifier is None else None
    return Calibration.objects.create(
        key=classifier_key(name=classifier) if classifier is not None else str(question_key),
        subject=(
            f"classifier {classifier}"
            if classifier is not None
            else f"{last.question_id}: {words}"
            if words is not None
            else last.question_id
        )[:300],
        question_type=last.type,
        option_keys=list(last.option_keys),
        method="vector" if vector else "temperature",
        temperature=calibrator.temperature,
        biases=None if calibrator.biases is None else list(calibrator.biases),
        report=json_finite(asdict(report)),
        label_keys=dict(label_keys),
        applies_to=None if everyone else sorted(set(applies_to) if applies_to else {key for key, _ in label_keys}),
    )


def _instructions_of(*, answer: EvaluationAnswer) -> str | None:
    """The question's instructions as stored (level `full`), when there are any."""
    return answer.instructions or None


def calibration_activate(*, calibration: Calibration) -> None:
    """Make it the active calibration of its key (the previous one is switched off in the same transaction)."""
    with transaction.atomic():
        Calibration.objects.filter(key=calibration.key, active=True).exclude(pk=calibration.pk).update(active=False)
        calibration.active = True
        calibration.save(update_fields=["active"])

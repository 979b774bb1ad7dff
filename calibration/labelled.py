"""Labelled stored answers: what a label may be, and answers as scored items for metrics and fitting.

Feedback, dataset runs, the admin and `manage.py calibrate` all read labels through here, so a label
means the same everywhere: the true option's key, with a noul's `true`/`false` and a score's level
index also accepted as JSON booleans and integers (a CSV gives them as text).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from typing import Any

from audit.models import EvaluationAnswer
from inference.metrics import Scored, confusion_matrix, metrics_compute, reliability_bins


def label_key_of(*, label: Any, option_keys: Sequence[str]) -> str | None:
    """The option key `label` names (a bool for noul or a boolean Decisions choice, an int level for score,
    or the key itself), or None when it names none of them. A boolean whose text is also a string choice of
    the question has the key `true (boolean)` (`api.decisions.questions`)."""
    if isinstance(label, bool):
        text = "true" if label else "false"
        if f"{text} (boolean)" in option_keys:
            return f"{text} (boolean)"
    elif isinstance(label, int):
        text = str(label)
    elif isinstance(label, str):
        text = label
    else:
        return None
    return text if text in option_keys else None


def label_rule(*, question_type: str, option_keys: Sequence[str]) -> str:
    """What a valid label is for this question, in words for a 422 or a command's error."""
    if question_type == "noul":
        return "true or false"
    if question_type == "score":
        return f"a level index from 0 to {len(option_keys) - 1}"
    return "one of the option keys: " + ", ".join(repr(k) for k in option_keys)


def answer_scored(*, answer: EvaluationAnswer, uncalibrated: bool) -> Scored:
    """A labelled answer as a scored item: as served, or (`uncalibrated`) as it was before any
    calibration, which is what a new calibration is fitted on."""
    keys = list(answer.option_keys)
    probabilities = (
        answer.uncalibrated_probabilities
        if uncalibrated and answer.uncalibrated_probabilities
        else answer.probabilities
    )
    assert answer.label is not None, "only labelled answers are scored"
    return Scored(probabilities=[float(probabilities[k]) for k in keys], label=keys.index(answer.label))


def labelled_report(*, answers: Iterable[EvaluationAnswer]) -> dict[str, Any]:
    """Metrics of labelled answers as served (accuracy, log loss, Brier, ECE, mean label mass) and, per
    question key, the confusion matrix and reliability bins: a dataset run's figures."""
    rows = [a for a in answers if a.label is not None]
    groups: dict[str, list[EvaluationAnswer]] = {}
    for row in rows:
        groups.setdefault(row.question_key, []).append(row)
    masses = [a.label_mass for a in rows if a.label_mass is not None]
    report: dict[str, Any] = {
        **json_finite(asdict(metrics_compute(items=[answer_scored(answer=a, uncalibrated=False) for a in rows]))),
        "label_mass": math.fsum(masses) / len(masses) if masses else None,
        "questions": [],
    }
    for key, group in groups.items():
        scored = [answer_scored(answer=a, uncalibrated=False) for a in group]
        report["questions"].append(
            {
                "question_key": key,
                "question_id": group[0].question_id,
                "type": group[0].type,
                "option_keys": list(group[0].option_keys),
                "n": len(group),
                "confusion": confusion_matrix(items=scored, options=len(group[0].option_keys)),
                "reliability": reliability_bins(items=scored),
            }
        )
    return report


def json_finite(value: Any) -> Any:
    """NaN (metrics of no items) as null, recursively, so a report is valid JSON on every database."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: json_finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_finite(v) for v in value]
    return value

"""Classifiers as the API serves them: built from rows, validated, read through a cache refreshed off the
request path.

Classifiers are read by the process's refresh thread every `CLASSIFIER_CACHE_SECONDS` while requests use them
(`serving.refresher`), so a request never queries the database; a save in the admin drops the cache at once in
that process (`audit.signals`; other processes see it within `CLASSIFIER_CACHE_SECONDS`). A database that cannot
be read keeps the classifiers last read; a process that has read none yet waits for them at most
`serving.refreshed.REQUEST_WAIT_SECONDS` (not at all while the database is known down), then answers 503.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from api.plumbing.api_error import ApiError
from audit.database import refreshed
from audit.models import Classifier
from inference.errors import value_quoted
from inference.questions import Question, QuestionType, question_build
from serving.config import language_model_named
from serving.refreshed import Unavailable

log = logging.getLogger(__name__)

CLASSIFIER_CACHE_SECONDS = 5.0
CLASSIFIER_IDLE_SECONDS = 300.0
"""Unread for this long, the classifiers leave the cache: an idle process makes no queries."""
NOUL_LABELS = ("true", "false")
CLASSIFIER_TYPES: tuple[QuestionType, ...] = ("choice", "noul", "score")


@dataclass(frozen=True)
class ClassifierSpec:
    """A classifier as the API serves it: built from a `Classifier` row and its labels.

    `labels` are the names returned in `probs` order; `question` is what the model is asked;
    `definition` is that question as a System One question object, stored with each classification
    so the audit shows what the model saw even after the classifier changes. A classifier whose
    labels break the rules (possible only outside the admin) has `problem` set and no question.
    """

    id: int | None
    name: str
    type: QuestionType
    description: str
    labels: tuple[str, ...]
    question: Question | None
    definition: dict[str, Any]
    problem: str = ""


def classifier_problems(*, type: str, labels: Sequence[str], max_answers: int) -> list[str]:
    """What makes a label set unservable, in words for the admin form and the logs (empty: fine).

    The limits are the API's: a choice or score needs 2 to `max_answers` labels, as a System One
    question does; a noul classifier always answers `true`/`false`, so its rows may only reword those.
    """
    problems = []
    if type not in CLASSIFIER_TYPES:
        return [f"unknown type {type!r}; use one of {', '.join(CLASSIFIER_TYPES)}"]
    blank = sum(1 for name in labels if not name.strip())
    if blank:
        problems.append("label names must not be blank")
    duplicates = sorted({name for name in labels if labels.count(name) > 1})
    if duplicates:
        problems.append(f"label names must be unique; repeated: {', '.join(duplicates)}")
    if type == "noul":
        others = [name for name in labels if name not in NOUL_LABELS]
        if others:
            problems.append(
                f"a noul classifier's labels are 'true' and 'false' (rows only reword them); "
                f"not allowed: {', '.join(others)}"
            )
    elif not 2 <= len(labels) <= max_answers:
        problems.append(f"a {type} classifier needs 2 to {max_answers} labels, got {len(labels)}")
    return problems


def _question_type(value: str) -> QuestionType:
    """A stored type as a question type (an unknown one, which `classifier_problems` refuses, as choice)."""
    return next((t for t in CLASSIFIER_TYPES if t == value), "choice")


def classifier_spec_build(
    *,
    id: int | None,
    name: str,
    type: str,
    description: str,
    instructions: str,
    labels: Sequence[tuple[str, str]],
    max_answers: int,
) -> ClassifierSpec:
    """The served form of a classifier; `labels` are (name, description) pairs in order.

    A blank description shows the label name to the model (a choice's null description); otherwise
    the model reads only the description, as with System One option keys.
    """
    problems = classifier_problems(type=type, labels=[n for n, _ in labels], max_answers=max_answers)
    qtype = _question_type(type)
    if problems:
        return ClassifierSpec(
            id=id,
            name=name,
            type=qtype,
            description=description,
            labels=tuple(n for n, _ in labels),
            question=None,
            definition={},
            problem="; ".join(problems),
        )
    text = instructions or None
    criteria: Any
    if qtype == "noul":
        worded = dict(labels)
        criteria = {side: worded.get(side) or None for side in NOUL_LABELS}
        names: tuple[str, ...] = NOUL_LABELS
    elif qtype == "choice":
        criteria = {n: (d or None) for n, d in labels}
        names = tuple(criteria)
    else:
        criteria = [d or n for n, d in labels]
        names = tuple(n for n, _ in labels)
    return ClassifierSpec(
        id=id,
        name=name,
        type=qtype,
        description=description,
        labels=names,
        question=question_build(id=name, type=qtype, instructions=text, criteria=criteria),
        definition={"type": qtype, "instructions": text, "criteria": criteria},
    )


def classifier_spec_of(*, row: Classifier) -> ClassifierSpec:
    """The served form of a saved classifier (its labels prefetched, or one query for them)."""
    return classifier_spec_build(
        id=row.pk,
        name=row.name,
        type=row.type,
        description=row.description,
        instructions=row.instructions,
        labels=[(label.name, label.description) for label in row.labels.all()],
        max_answers=settings.OPENJEV.max_answers,
    )


_ALL = "all"


def classifier_cache_forget() -> None:
    """Drop the cached classifiers (saves and deletes, tests) so the next request reads the database."""
    _cache.forget()


def _classifiers_fetch() -> dict[str, ClassifierSpec]:
    """Every classifier with its labels (on the refresh thread)."""
    found = {}
    for row in Classifier.objects.prefetch_related("labels"):
        spec = classifier_spec_of(row=row)
        if spec.problem:
            log.warning("classifier %r cannot be served: %s", row.name, spec.problem)
        found[row.name] = spec
    return found


_cache = refreshed(
    name="classifiers",
    fetch=lambda keys: {key: _classifiers_fetch() for key in keys},  # looked up at each call: tests replace it
    every=CLASSIFIER_CACHE_SECONDS,
    idle=CLASSIFIER_IDLE_SECONDS,
)


async def classifiers_get() -> dict[str, ClassifierSpec]:
    """Name → classifier as last read; `Unavailable` when this process has read none and cannot now."""
    return await _cache.load(_ALL)


async def classifier_names_list() -> list[str]:
    """Servable classifier names for `GET /v1/models`; a database outage lists none rather than failing
    the model list, which Jev clients need whatever the state of the classifiers."""
    try:
        classifiers = await classifiers_get()
    except Unavailable:  # logged by the refresh thread
        return []
    return [name for name, spec in classifiers.items() if not spec.problem]


async def classifier_find(*, name: str) -> ClassifierSpec:
    """The classifier called `name`: 404 when there is none (or it cannot be served), 503 when the
    database cannot be read (retryable, like an API key that cannot be checked)."""
    try:
        classifiers = await classifiers_get()
    except Unavailable:  # logged by the refresh thread
        raise ApiError(
            503, "service_unavailable", "classifiers cannot be read right now; retry shortly", {"Retry-After": "5"}
        ) from None
    spec = classifiers.get(name)
    if spec is None:
        if language_model_named(name=name, names=settings.OPENJEV.language_model_names):
            raise ApiError(
                404,
                "not_found",
                f"{value_quoted(name)} is a language model, not a classifier: POST /v1/classify "
                "serves classifiers defined in the admin (GET /v1/models lists them "
                "after the model names); use POST /v1/systemone for the model itself",
            )
        raise ApiError(
            404,
            "not_found",
            f"no classifier named {value_quoted(name)}; GET /v1/models lists them after the model names",
        )
    if spec.problem:
        raise ApiError(
            404, "not_found", f"classifier {value_quoted(name)} cannot be served: {spec.problem}; fix it in the admin"
        )
    return spec

"""Active calibrations as serving applies them: read through a cache refreshed off the request path, applied to
typed answers.

A calibration is fitted offline (`manage.py calibrate`) and switched on in the admin; serving reads the active
ones through a cache the process's refresh thread reads every `CALIBRATION_CACHE_SECONDS` while requests use it
(`serving.refresher`; dropped at once in this process when one is saved: `audit.signals`), so a request never
queries the database, and none is made with `OPENJEV_CALIBRATION=off`. A database that cannot be read keeps the
calibrations last read; a process that has read none yet waits for them at most
`serving.refreshed.REQUEST_WAIT_SECONDS` (not at all while the database is known down) and then serves
uncalibrated answers rather than failing the request: the answers are still right, only less well calibrated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from django.conf import settings

from audit.callers import Caller
from audit.database import refreshed
from audit.models import Calibration
from inference.runner import Outcome
from inference.scoring import Answer
from inference.vector_scaling import Calibrator, answer_calibrate, question_key
from serving.refreshed import Unavailable

CALIBRATION_CACHE_SECONDS = 5.0
CALIBRATION_IDLE_SECONDS = 300.0
"""Unread for this long, the calibrations leave the cache: an idle process makes no queries."""
CLASSIFIER_KEY_PREFIX = "classifier:"
CALIBRATED_HEADER = "x-openjev-calibrated"

_ALL = "all"


@dataclass(frozen=True)
class _Active:
    """The active calibrations: by question (or classifier) key, each with the callers it applies to."""

    calibrators: dict[str, Calibrator]
    scopes: dict[str, frozenset[str]]
    """Keys of the calibrations limited to some callers (their API key labels); the others apply to everyone."""

    def for_caller(self, *, label: str) -> dict[str, Calibrator]:
        if not self.scopes:
            return self.calibrators
        return {
            key: found for key, found in self.calibrators.items() if key not in self.scopes or label in self.scopes[key]
        }


@dataclass(frozen=True)
class Calibrating:
    """The active calibrators (by key) for one request; `classifier` set for `POST /v1/classify`, whose
    answers are calibrated by the classifier's name rather than by their question."""

    calibrators: Mapping[str, Calibrator]
    classifier: str | None = None


def classifier_key(*, name: str) -> str:
    return f"{CLASSIFIER_KEY_PREFIX}{name}"


def calibration_cache_forget() -> None:
    """Drop the cached calibrations (saves, deletes, tests) so the next request reads the database."""
    _cache.forget()


def calibrator_of(*, row: Calibration) -> Calibrator:
    return Calibrator(temperature=row.temperature, biases=None if row.biases is None else tuple(row.biases), ref=row.pk)


def _active_fetch() -> _Active:
    """Every active calibration (on the refresh thread)."""
    rows = list(Calibration.objects.filter(active=True))
    return _Active(
        calibrators={row.key: calibrator_of(row=row) for row in rows},
        scopes={row.key: frozenset(row.applies_to) for row in rows if row.applies_to},
    )


_cache = refreshed(
    name="calibrations",
    fetch=lambda keys: {key: _active_fetch() for key in keys},
    every=CALIBRATION_CACHE_SECONDS,
    idle=CALIBRATION_IDLE_SECONDS,
)


async def calibrating_get(*, caller: Caller | None, classifier: str | None = None) -> Calibrating:
    """What this request applies: the active calibrations that apply to its caller (a calibration limited to
    some API keys changes only their answers), nothing when calibration is off or none could be read yet."""
    if not settings.OPENJEV.calibration:
        return Calibrating(calibrators={})
    try:
        active = await _cache.load(_ALL)
    except Unavailable:  # logged once per outage by the refresh thread
        return Calibrating(calibrators={})
    label = caller.label if caller is not None else ""
    return Calibrating(calibrators=active.for_caller(label=label), classifier=classifier)


def answer_calibrated(*, answer: Answer, calibrating: Calibrating) -> Answer:
    """The answer through its active calibrator, or as it was when it has none."""
    if not calibrating.calibrators:
        return answer
    key = (
        classifier_key(name=calibrating.classifier)
        if calibrating.classifier is not None
        else question_key(question=answer.question)
    )
    found = calibrating.calibrators.get(key)
    if found is None or (found.biases is not None and len(found.biases) != len(answer.probabilities)):
        return answer
    return answer_calibrate(answer=answer, calibrator=found, confidence=settings.OPENJEV.confidence)


def outcome_calibrated(*, outcome: Outcome, calibrating: Calibrating) -> Outcome:
    if not calibrating.calibrators:
        return outcome
    return replace(
        outcome, answers=tuple(answer_calibrated(answer=a, calibrating=calibrating) for a in outcome.answers)
    )


def calibrated_header(*, answers: tuple[Answer, ...]) -> dict[str, str]:
    """`x-openjev-calibrated`: the ids of the calibrated answers, comma-separated, each once (every input
    of a classification answers the classifier's one question); absent when none is."""
    ids = list(dict.fromkeys(a.question_id for a in answers if a.calibration is not None))
    return {CALIBRATED_HEADER: ",".join(ids)} if ids else {}

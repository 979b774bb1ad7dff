"""Active calibrations as serving applies them: read through a short cache, applied to typed answers.

A calibration is fitted offline (`manage.py calibrate`) and switched on in the admin; serving reads
the active ones through the same kind of in-process cache as classifiers (`CALIBRATION_CACHE_SECONDS`,
dropped at once in this process when one is saved: `audit.signals`), so the hot path makes at
most one small query every few seconds, in a worker thread, and none with `OPENJEV_CALIBRATION=off`.
A database that cannot be read serves uncalibrated answers rather than failing the request: the
answers are still right, only less well calibrated.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace

from django.conf import settings
from django.db import connections

from audit.callers import Caller
from audit.models import Calibration
from inference.runner import Outcome
from inference.scoring import Answer
from inference.vector_scaling import Calibrator, answer_calibrate, question_key
from serving.ttlcache import TtlCache

log = logging.getLogger(__name__)

CALIBRATION_CACHE_SECONDS = 5.0
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


_cache: TtlCache[str, _Active] = TtlCache(seconds=CALIBRATION_CACHE_SECONDS, max_entries=1)


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
    """Every active calibration (in a worker thread that closes its connection)."""
    try:
        rows = list(Calibration.objects.filter(active=True))
    finally:
        connections.close_all()
    return _Active(
        calibrators={row.key: calibrator_of(row=row) for row in rows},
        scopes={row.key: frozenset(row.applies_to) for row in rows if row.applies_to},
    )


def _active_load() -> _Active:
    return _cache.load(_ALL, _active_fetch)


async def calibrating_get(*, caller: Caller | None, classifier: str | None = None) -> Calibrating:
    """What this request applies: the active calibrations that apply to its caller (a calibration limited to
    some API keys changes only their answers), nothing when calibration is off or the database cannot be read."""
    if not settings.OPENJEV.calibration:
        return Calibrating(calibrators={})
    label = caller.label if caller is not None else ""
    cached = _cache.get(_ALL)
    if cached is not None:
        return Calibrating(calibrators=cached.value.for_caller(label=label), classifier=classifier)
    try:
        active = await asyncio.to_thread(_active_load)
    except Exception:
        log.warning("could not read calibrations; serving uncalibrated answers", exc_info=True)
        return Calibrating(calibrators={})
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

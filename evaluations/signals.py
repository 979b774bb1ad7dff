"""Caches of rows the API reads on its hot path, dropped when those rows change in this process.

Models know nothing of the caches: these receivers connect them (`EvaluationsConfig.ready`). A key's
row is forgotten at once; classifiers are forgotten once the transaction commits, since a request
reading in between would cache the old definition again. Other processes see changes within their
cache's lifetime. `QuerySet.update()` sends no signals: code that uses it forgets the cache itself.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from evaluations.calibrations import calibration_cache_forget
from evaluations.classify.registry import classifier_cache_forget
from evaluations.keys import apikey_cache_forget
from evaluations.models import ApiKey, Calibration, Classifier, ClassifierLabel


@receiver([post_save, post_delete], sender=ApiKey, dispatch_uid="openjev-apikey-cache")
def apikey_changed(sender: type[ApiKey], instance: ApiKey, **kwargs: Any) -> None:
    apikey_cache_forget(prefix=instance.prefix)


@receiver([post_save, post_delete], sender=Classifier, dispatch_uid="openjev-classifier-cache")
@receiver([post_save, post_delete], sender=ClassifierLabel, dispatch_uid="openjev-classifier-label-cache")
def classifier_changed(sender: type[Classifier | ClassifierLabel], **kwargs: Any) -> None:
    transaction.on_commit(classifier_cache_forget)


@receiver([post_save, post_delete], sender=Calibration, dispatch_uid="openjev-calibration-cache")
def calibration_changed(sender: type[Calibration], **kwargs: Any) -> None:
    transaction.on_commit(calibration_cache_forget)

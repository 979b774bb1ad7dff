"""The classifier registry's cache, forgotten once a change to a classifier or its labels commits (a
request reading in between would cache the old definition again); see `audit.signals`."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from api.classify.registry import classifier_cache_forget
from audit.models import Classifier, ClassifierLabel


@receiver([post_save, post_delete], sender=Classifier, dispatch_uid="openjev-classifier-cache")
@receiver([post_save, post_delete], sender=ClassifierLabel, dispatch_uid="openjev-classifier-label-cache")
def classifier_changed(sender: type[Classifier | ClassifierLabel], **kwargs: Any) -> None:
    transaction.on_commit(classifier_cache_forget)

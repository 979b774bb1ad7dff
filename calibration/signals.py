"""The served calibrations' cache, forgotten once a change to a calibration commits (a request
reading in between would cache the old one again); see `audit.signals`."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from audit.models import Calibration
from calibration.applied import calibration_cache_forget


@receiver([post_save, post_delete], sender=Calibration, dispatch_uid="openjev-calibration-cache")
def calibration_changed(sender: type[Calibration], **kwargs: Any) -> None:
    transaction.on_commit(calibration_cache_forget)

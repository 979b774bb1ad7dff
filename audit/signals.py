"""Caches of rows the API reads on its hot path, dropped when those rows change in this process.

Models know nothing of the caches: each cache's app connects its receivers (`AuditConfig.ready` for
keys, `CalibrationConfig.ready` for calibrations, `ApiConfig.ready` for classifiers). A key's row is
forgotten at once; other processes see changes within their cache's lifetime. `QuerySet.update()` sends
no signals: code that uses it forgets the cache itself.
"""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from audit.keys import apikey_cache_forget
from audit.models import ApiKey


@receiver([post_save, post_delete], sender=ApiKey, dispatch_uid="openjev-apikey-cache")
def apikey_changed(sender: type[ApiKey], instance: ApiKey, **kwargs: Any) -> None:
    apikey_cache_forget(prefix=instance.prefix)

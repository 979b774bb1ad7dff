"""The Celery application of `OPENJEV_TASK_ENGINE=celery`: `celery -A openjev_site worker` runs batch work.

Django's tasks API enqueues through django-tasks-celery, which registers every `@task` with this app when its
module is imported; the worker imports the batch tasks (`imports`) so it knows them before the first arrives.
Settings come from Django's (`CELERY_*`: the broker, late acknowledgement, the visibility timeout); Celery's
Django fixup sets Django up in the worker before it imports them.

A worker that starts hands every unfinished batch a task (`batches_resume`): what a broker lost, or a worker that
died took with it, is picked up by starting a worker.
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery
from celery.signals import worker_init, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openjev_site.settings")

app = Celery("openjev")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.imports = ("api.batches.tasks",)


@worker_init.connect
def worker_yields(**_: Any) -> None:
    """Before the pool starts, so every child inherits it: the API on this machine gets the CPU first."""
    from api.batches.yielding import batch_process_yield

    batch_process_yield()


@worker_ready.connect
def batches_resumed(**_: Any) -> None:
    from api.batches.tasks import batches_resume  # once Django is set up: this module is imported before

    batches_resume()

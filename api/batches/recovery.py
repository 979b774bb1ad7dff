"""What a batch worker on this machine picks up when it starts: the work a killed worker here left behind.

A worker killed mid-chunk (`serve` SIGKILLed, the machine rebooted) leaves its task marked running in the task
queue and its lines claimed until their lease ends. A worker starting on the same machine can tell that one is
dead (its process is gone) and takes both back at once, rather than waiting out the lease: the task is made
ready again and the lines pending again. Every batch task is idempotent (lines answered stay answered), so the
task's second run only does what the first did not. A worker on another machine cannot be told dead by a pid:
its lines come back when their lease ends (`OPENJEV_BATCH_LEASE_SECONDS`), and Celery delivers its task again.
"""

from __future__ import annotations

import logging
import os
import socket

from django.db import transaction
from django.tasks import TaskResultStatus
from django_tasks_db.models import DBTaskResult

from batches.models import BatchItem

log = logging.getLogger(__name__)

HOST_CHARACTERS = 32
"""What a worker id keeps of the host's name (ids and claims are bounded to 64 characters)."""


def host_name() -> str:
    return socket.gethostname()[:HOST_CHARACTERS]


def worker_id_local() -> str:
    """`host:pid`: a worker id that says where the worker runs, so a later one here can tell it dead."""
    return f"{host_name()}:{os.getpid()}"


def _dead_here(*, worker: str, host: str) -> bool:
    """Whether `worker` (`host:pid[:...]`) ran on this machine and its process is gone."""
    name, _, rest = worker.partition(":")
    pid = rest.partition(":")[0]
    if name != host or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def work_recovered() -> tuple[int, int]:
    """Make the tasks and lines of dead workers on this machine ready and pending again; (tasks, lines)."""
    host = host_name()
    tasks = lines = 0
    with transaction.atomic():
        for row in DBTaskResult.objects.running().select_for_update():
            workers = row.worker_ids or []
            if workers and _dead_here(worker=str(workers[-1]), host=host):
                row.status = TaskResultStatus.READY
                row.save(update_fields=["status"])
                tasks += 1
    claimed = BatchItem.objects.filter(state=BatchItem.CLAIMED, claimed_by__startswith=f"{host}:")
    dead = {w for w in claimed.values_list("claimed_by", flat=True).distinct() if _dead_here(worker=w, host=host)}
    if dead:
        lines = claimed.filter(claimed_by__in=dead).update(state=BatchItem.PENDING, claimed_by="", claimed_at=None)
    if tasks or lines:
        log.warning("took back %d batch task(s) and %d line(s) from workers killed on this machine", tasks, lines)
    return tasks, lines

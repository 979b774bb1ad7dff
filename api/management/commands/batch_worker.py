"""`manage.py batch_worker`: django-tasks-db's worker (`db_worker`) for batch jobs, with this service's evaluator,
what a killed worker here left behind taken back first (`api.batches.recovery`) and every unfinished batch handed
a task (`api.batches.tasks.batches_resume`: a worker elsewhere may have died with its last). `serve` runs one beside the
API (`OPENJEV_BATCH_WORKER`); run more, or this alone, as the deployment needs. Its options are `db_worker`'s.

A worker that starts before its database can hold batches (no `manage.py migrate` yet, the database not up) waits
for it, saying so once, rather than failing over and over: `serve` starts one with every API, also where
nothing is stored and no batch is ever run. A worker that loses its database while it runs exits with one line
(status `DATABASE_LOST`), not a traceback: the lines it held are a killed worker's to the next one on this machine
(`api.batches.recovery`, which tells a dead worker by its pid), and `serve` starts that one, which waits for the
database as above.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError
from django.db import DatabaseError, InterfaceError, OperationalError, connection
from django_tasks_db.management.commands.db_worker import Command as DatabaseWorkerCommand
from django_tasks_db.models import DBTaskResult

from api.batches.recovery import work_recovered, worker_id_local
from api.batches.tasks import batches_resume
from api.batches.yielding import batch_process_yield
from batches.models import BatchItem
from serving.evaluator import evaluator_build, evaluator_install

log = logging.getLogger(__name__)

DATABASE_LOST = 75
"""The exit status of a worker whose database went away (EX_TEMPFAIL: try again later)."""

TABLES_WAIT_SECONDS = 5.0
"""How often a worker waiting for its database looks again."""


def tables_missing() -> str | None:
    """What keeps the database from holding batch work (tables not migrated, the database unreachable); None
    when nothing does."""
    needed = {DBTaskResult._meta.db_table, BatchItem._meta.db_table}
    try:
        missing = needed - set(connection.introspection.table_names())
    except DatabaseError as exc:
        return f"the database is unreachable ({type(exc).__name__})"
    finally:
        connection.close()
    return f"the database has no table {', '.join(sorted(missing))} (run manage.py migrate)" if missing else None


def tables_wait() -> None:
    told = False
    while (missing := tables_missing()) is not None:
        if not told:
            log.warning("the batch worker waits: %s; looking again every %.0f s", missing, TABLES_WAIT_SECONDS)
            told = True
        time.sleep(TABLES_WAIT_SECONDS)
    if told:
        log.info("the database holds batch work now: the batch worker starts")


class Command(DatabaseWorkerCommand):
    help = "Run the batch jobs' worker (django-tasks-db), with the service's evaluator"

    def handle(self, *args: Any, **options: Any) -> None:
        config = settings.OPENJEV
        if config.task_engine != "database":
            raise CommandError("OPENJEV_TASK_ENGINE is celery: run `celery -A openjev_site worker` instead")
        batch_process_yield()
        tables_wait()
        evaluator_install(evaluator_build(config=config))
        work_recovered()
        batches_resume()
        options["worker_id"] = worker_id_local()
        try:
            super().handle(*args, **options)
        except (OperationalError, InterfaceError) as exc:
            log.warning("the batch worker lost its database (%s): exiting, to be started again", type(exc).__name__)
            raise SystemExit(DATABASE_LOST) from None

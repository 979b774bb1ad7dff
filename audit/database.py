"""The database as this process's background threads use it: one outage state, bounded statements, one refresher.

Every thread that reads or writes the database off the request path (the caches' refresh thread, the spool's
drainer, the storage writer) reports into `database_outage`, so the process logs one warning when the database
stops answering and one when it answers again, and makes one connection attempt per back-off step meanwhile.
Those threads mark themselves with `database_thread_bounded`: on PostgreSQL each connection they open gets
`statement_timeout` (`OPENJEV_DATABASE_TIMEOUT`), so a locked table or a slow server ends in an error they handle
instead of a wait without end (connecting is bounded for every connection by `openjev_site.databases`). The admin,
migrations and management commands keep no statement bound: an index built on a large table takes longer.

`refreshed` makes a request-path cache (`serving.refreshed`) on the process's one refresh thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created

from serving.outage import Outage
from serving.refreshed import Refreshed
from serving.refresher import Refresher

log = logging.getLogger(__name__)

database_outage = Outage(what="the database", log=log)
"""The database as this process sees it (every background user of it reports here)."""

_bounded = threading.local()


def database_unavailable(exc: BaseException) -> bool:
    """Whether `exc` says the database cannot be reached or did not answer in time (worth trying again later),
    rather than a fault no retry mends."""
    return isinstance(exc, (OperationalError, InterfaceError))


def database_thread_bounded() -> None:
    """Bound the statements of every connection this thread opens from now on (called at a thread's start)."""
    _bounded.on = True


def _statement_timeout_set(*, sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    if connection.vendor != "postgresql" or not getattr(_bounded, "on", False):
        return
    milliseconds = round(settings.OPENJEV.database_timeout * 1000)
    with connection.cursor() as cursor:
        cursor.execute(f"SET statement_timeout = {milliseconds:d}")


connection_created.connect(_statement_timeout_set, dispatch_uid="openjev-statement-timeout")


def _round_done() -> None:
    """No refresh keeps a connection open between rounds (idle connections add up across workers)."""
    connections.close_all()


refresher = Refresher(
    outage=database_outage,
    unavailable=database_unavailable,
    thread_setup=database_thread_bounded,
    round_done=_round_done,
)
"""The process's one thread that reads the request path's caches."""


def refreshed[K: Hashable, V](
    *, name: str, fetch: Callable[[list[K]], dict[K, V]], every: float, idle: float, max_entries: int = 1
) -> Refreshed[K, V]:
    """A cache of the request path, refreshed every `every` seconds while in use (see `serving.refresher`)."""
    return Refreshed(name=name, fetch=fetch, every=every, idle=idle, max_entries=max_entries, refresher=refresher)


def caches_age() -> dict[str, float | None]:
    """Seconds since each cache's oldest value was read from the database (None: it holds none)."""
    return refresher.ages()

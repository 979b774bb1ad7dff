"""The process's one thread that reads the request path's caches (`serving.refreshed`) from the database.

It refreshes each cache every `every` seconds while it is in use (an entry no request read for `idle` seconds is
dropped instead: an idle process makes no queries), and reads what requests miss as soon as they miss it, all of
one cache's keys in one query. It makes one attempt per back-off step while the database is down (the process's
`Outage` for it, shared with the storage drainer), so the database coming back meets no stampede. No Django: the
caller passes how to tell an unreachable database from a bug, and what to do around each round (the hooks: bound
the thread's statements, close its connections).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from serving.outage import Outage
from serving.refreshed import Refreshed

log = logging.getLogger(__name__)

USER = "caches"
"""How the refresh thread names itself to the outage (`serving.outage`)."""


class Refresher:
    """The process's one refresh thread, started on first use and again after a fork."""

    def __init__(
        self,
        *,
        outage: Outage,
        unavailable: Callable[[BaseException], bool],
        thread_setup: Callable[[], None] = lambda: None,
        round_done: Callable[[], None] = lambda: None,
    ) -> None:
        self.outage = outage
        self._unavailable = unavailable
        self._thread_setup = thread_setup
        self._round_done = round_done
        self.caches: list[Refreshed[Any, Any]] = []
        self._wake = threading.Condition()
        self._woken = False
        self._pid = 0
        self._broken: set[str] = set()
        """Caches whose last round failed with a fault no retry mends (logged once until one succeeds)."""
        os.register_at_fork(after_in_child=self._after_fork)

    def register(self, cache: Refreshed[Any, Any]) -> None:
        self.caches.append(cache)

    def ages(self) -> dict[str, float | None]:
        """Seconds since each cache's oldest value was read (None: it holds none), for `/health`."""
        now = time.time()
        return {c.name: None if c.read_at is None else round(max(0.0, now - c.read_at), 3) for c in self.caches}

    def forget(self) -> None:
        """Drop every cache's values (tests: nothing read for one test serves the next, or reads its database)."""
        for cache in self.caches:
            cache.forget()

    def attempt_possible(self) -> bool:
        """False while the caches' reads fail and the next back-off step is not due: a miss fails at once."""
        return not self.outage.failing(by=USER) or self.outage.next_attempt_in == 0.0

    def wake(self) -> None:
        self.running()
        with self._wake:
            self._woken = True
            self._wake.notify()

    def running(self) -> None:
        """Start the thread in this process if it is not running (the first use; a forked child)."""
        if self._pid == os.getpid():
            return
        with self._wake:
            if self._pid == os.getpid():
                return
            self._pid = os.getpid()
            threading.Thread(target=self._run, name="openjev-refresh", daemon=True).start()

    def _after_fork(self) -> None:
        self._wake = threading.Condition()
        self._woken = False
        for cache in self.caches:
            cache.after_fork()

    def _run(self) -> None:
        self._thread_setup()
        while True:
            self._wait()
            if not self.outage.attempt_claimed(by=USER):
                for cache in self.caches:
                    cache.misses_refused()
                continue
            self._round()

    def _wait(self) -> None:
        """Until a cache is due, a miss arrives, or (while the database is down) the next back-off step."""
        with self._wake:
            while not self._woken:
                now = time.monotonic()
                due = [d for c in self.caches if (d := c.due_in(now)) is not None]
                wait = min(due) if due else None
                if self.outage.failing(by=USER) and wait is not None:
                    wait = max(wait, self.outage.next_attempt_in)
                if wait is not None and wait <= 0:
                    return
                self._wake.wait(wait)
            self._woken = False

    def _round(self) -> None:
        """Each due cache once; an unreachable database ends the round (one attempt per back-off step)."""
        now = time.monotonic()
        try:
            for cache in [c for c in self.caches if c.due_in(now) == 0.0]:
                try:
                    if cache.refresh():
                        self.outage.recovered(by=USER)
                        self._broken.discard(cache.name)
                except Exception as exc:
                    if self._unavailable(exc):
                        self.outage.failed(
                            error=exc, consequence="the request path serves the last values read", by=USER
                        )
                        return
                    if cache.name not in self._broken:
                        self._broken.add(cache.name)
                        log.exception("could not refresh %s; serving the last values read", cache.name)
        finally:
            self._round_done()

"""One log line when a dependency stops answering and one when it answers again, with what failed meanwhile; and
one connection attempt per back-off step while it is down.

A database outage used to log a traceback per request (234 warnings in 30 s) and open a connection per request;
an operator needs to know that it began, why, and when it ended and what it cost, and the database coming back
should not meet a stampede. Every user of one dependency in a process (the storage drainer, the caches' refresh
thread, the key-touch writes) reports into the same `Outage`, so the process logs one warning per outage and,
while it lasts, makes one attempt per back-off step between them: `attempt_claimed` hands the step's attempt to
one caller, the others wait (or, on the request path, answer at once without it). The outage ends when a user that
failed in it succeeds (each names itself: `by`), so one that never failed (a cache read beside a missing table,
say) does not end it while the others still fail, and the log does not flap. Thread-safe.
"""

from __future__ import annotations

import logging
import os
import threading
import time

CAUSE_MAX = 200
"""Characters of the cause quoted (a driver's message can carry a whole connection string's worth)."""
BACKOFF_SECONDS = (0.25, 0.5, 1.0, 2.0, 3.0)
"""The wait before each further attempt while the dependency is down (the last repeats)."""


class Outage:
    """The state of one dependency as this process sees it: answering, or failing since when."""

    def __init__(self, *, what: str, log: logging.Logger, backoff: tuple[float, ...] = BACKOFF_SECONDS) -> None:
        self.what = what
        self.backoff = backoff
        self._log = log
        self._lock = threading.Lock()
        self.since: float | None = None
        self.failures = 0
        self._failing: set[str] = set()
        self._next_attempt = 0.0

    def failed(self, *, error: BaseException, consequence: str, by: str = "") -> None:
        """Count one failed attempt of `by` and schedule the next step; the first of an outage is logged as a
        warning with its cause."""
        with self._lock:
            self.failures += 1
            self._failing.add(by)
            now = time.monotonic()
            step = self.backoff[min(self.failures, len(self.backoff)) - 1]
            self._next_attempt = now + step
            if self.since is not None:
                return
            self.since = now
        cause = (str(error).strip().splitlines() or [type(error).__name__])[0][:CAUSE_MAX]
        self._log.warning(
            "%s unavailable to process %d (%s: %s); %s",
            self.what,
            os.getpid(),
            type(error).__name__,
            cause,
            consequence,
        )

    def recovered(self, *, summary: str = "", by: str = "") -> None:
        """The dependency answered `by`: if `by` had failed in the outage, its one closing line."""
        with self._lock:
            since, failures = self.since, self.failures
            if since is None or by not in self._failing:
                return
            self.since, self.failures, self._next_attempt = None, 0, 0.0
            self._failing.clear()
        self._log.warning(
            "%s available again to process %d after %.1f s (%d failed attempt(s))%s",
            self.what,
            os.getpid(),
            time.monotonic() - since,
            failures,
            f"; {summary}" if summary else "",
        )

    def attempt_claimed(self, *, by: str = "") -> bool:
        """Whether `by` may try the dependency now: always while it answers, or while `by` has not failed in this
        outage (it may find it answers what it needs); else once per back-off step, shared by the users that
        failed (the caller that gets True makes the step's one attempt, and reports `failed` or `recovered`)."""
        with self._lock:
            if by not in self._failing:
                return True
            now = time.monotonic()
            if now < self._next_attempt:
                return False
            self._next_attempt = now + self.backoff[min(self.failures, len(self.backoff)) - 1]
            return True

    @property
    def next_attempt_in(self) -> float:
        """Seconds until the next back-off step (0: an attempt may be made now)."""
        with self._lock:
            return 0.0 if self.since is None else max(0.0, self._next_attempt - time.monotonic())

    def failing(self, *, by: str = "") -> bool:
        """Whether `by` failed in the outage going on (it waits for a back-off step before it tries again)."""
        return by in self._failing

    @property
    def down_seconds(self) -> float:
        since = self.since
        return 0.0 if since is None else time.monotonic() - since

    def forget(self) -> None:
        """Take the dependency as answering again, without a closing line (tests that simulated an outage)."""
        with self._lock:
            self.since, self.failures, self._next_attempt = None, 0, 0.0
            self._failing.clear()

"""The live dashboard's feed: what this process evaluated, second by second, sent to a channels group.

Each finished evaluation is counted into the tally of the second it finished in (a few dictionary
updates on the event loop, nothing else). Once a second a flusher task sends the completed seconds'
tallies to the `DASHBOARD_GROUP` group, where every open dashboard socket
(`audit.dashboard_live`) receives them. With the in-memory channel layer that reaches the
dashboards served by this process; with `OPENJEV_CHANNEL_LAYER_URL=redis://...` every API process
sends to the same Redis group, so one dashboard sees all of them (it adds the tallies up). One group
message per process per busy second, whatever the request rate; nothing at all while idle.

A tally has the same shape as a bucket of the dashboard's history (`tally_history`, read from the
stored evaluations), so the page draws both alike: counts by status class, backend generations,
a latency histogram with logarithmic buckets (nearest-rank percentiles are read from it within
half a bucket, about 6 %), and a histogram of the answers' label mass.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from channels.layers import get_channel_layer

from inference.runner import Outcome

log = logging.getLogger(__name__)

DASHBOARD_GROUP = "openjev.dashboard"
TICK_SECONDS = 1.0
IDLE_STOP_SECONDS = 30.0
"""A flusher with nothing to send for this long ends; the next evaluation starts a new one."""
SEND_TIMEOUT_SECONDS = 2.0
FAILURE_LOG_SECONDS = 60.0
"""A channel layer that stays down is logged once a minute, not once a second."""
LATENCY_BUCKETS_PER_DECADE = 20
"""Latency histogram resolution: bucket edges 10^(1/20) (12 %) apart."""
LATENCY_MIN_MS = 0.01
LABEL_MASS_BINS = 10
STATUS_CLASSES = ("answered", "client_error", "cancelled", "overloaded", "server_error")


def status_class(*, status: int) -> str:
    """The dashboard's status mix: 200, other 4xx, 499 (client gone or cancelled), 529, other 5xx."""
    if status == 200:
        return "answered"
    if status == 499:
        return "cancelled"
    if status == 529:
        return "overloaded"
    return "client_error" if status < 500 else "server_error"


def latency_bucket(*, ms: float) -> int:
    return math.floor(math.log10(max(ms, LATENCY_MIN_MS)) * LATENCY_BUCKETS_PER_DECADE)


def label_mass_bin(*, mass: float) -> int:
    return min(max(int(mass * LABEL_MASS_BINS), 0), LABEL_MASS_BINS - 1)


@dataclass
class Tally:
    """Evaluations that finished in one span of time (a second live, a history bucket from the database)."""

    second: int
    """Start of the span, in Unix seconds."""
    n: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    generations: int | None = 0
    """Backend generations (warm-ups, branches, priors); None where unknown (the database keeps none)."""
    latency: dict[int, int] = field(default_factory=dict)
    """Answered evaluations by latency bucket (`latency_bucket`)."""
    label_mass: list[int] = field(default_factory=lambda: [0] * LABEL_MASS_BINS)

    def add(self, *, status: int, total_ms: float | None, masses: Iterable[float], generations: int) -> None:
        self.n += 1
        kind = status_class(status=status)
        self.statuses[kind] = self.statuses.get(kind, 0) + 1
        if self.generations is not None:
            self.generations += generations
        if status == 200 and total_ms is not None:
            bucket = latency_bucket(ms=total_ms)
            self.latency[bucket] = self.latency.get(bucket, 0) + 1
        for mass in masses:
            self.label_mass[label_mass_bin(mass=mass)] += 1

    def message(self) -> dict[str, Any]:
        """JSON-ready, compact: a second's tally travels through Redis to every open dashboard."""
        return {
            "t": self.second,
            "n": self.n,
            "status": self.statuses,
            "gen": self.generations,
            "lat": {str(k): v for k, v in self.latency.items()},
            "mass": self.label_mass,
        }


class _LoopFeed:
    """The tallies of one event loop not sent yet, and its flusher task."""

    def __init__(self) -> None:
        self.tallies: dict[int, Tally] = {}
        self.task: asyncio.Task[None] | None = None


class LiveFeed:
    """Counts evaluations per second and sends completed seconds to the dashboard group."""

    def __init__(self, *, group: str = DASHBOARD_GROUP) -> None:
        self.group = group
        self._last_failure_log = -math.inf
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopFeed] = weakref.WeakKeyDictionary()

    def record(self, *, status: int, total_ms: float | None, outcome: Outcome | None) -> None:
        """Count one evaluation that just finished (on the event loop; never raises into the request)."""
        try:
            loop = asyncio.get_running_loop()
            feed = self._loops.get(loop)
            if feed is None:
                feed = self._loops[loop] = _LoopFeed()
            second = int(time.time())
            tally = feed.tallies.get(second)
            if tally is None:
                tally = feed.tallies[second] = Tally(second=second)
            tally.add(
                status=status,
                total_ms=total_ms,
                masses=(a.label_mass for a in outcome.answers) if outcome else (),
                generations=outcome.generations if outcome else 0,
            )
            if feed.task is None or feed.task.done():
                feed.task = loop.create_task(self._flush_loop(feed), name="openjev-livefeed")
        except Exception:
            log.exception("could not count an evaluation for the live dashboard")

    async def _flush_loop(self, feed: _LoopFeed) -> None:
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < IDLE_STOP_SECONDS:
            await asyncio.sleep(TICK_SECONDS - time.time() % TICK_SECONDS + 0.01)
            current = int(time.time())
            done = [feed.tallies.pop(s) for s in sorted(s for s in feed.tallies if s < current)]
            if done:
                await self._send(done)
            if done or feed.tallies:
                idle_since = time.monotonic()

    async def _send(self, tallies: list[Tally]) -> None:
        """One group message per tick, whatever the backlog. A dashboard that misses a few seconds (the
        layer is slow or down) is better than a feed that falls behind: failures drop them, logged."""
        layer = get_channel_layer()
        if layer is None:
            return
        try:
            async with asyncio.timeout(SEND_TIMEOUT_SECONDS):
                await layer.group_send(
                    self.group, {"type": "dashboard.tick", "tallies": [t.message() for t in tallies]}
                )
        except Exception as exc:
            now = time.monotonic()
            if now - self._last_failure_log > FAILURE_LOG_SECONDS:
                self._last_failure_log = now
                log.warning(
                    "the live dashboard feed could not reach the channel layer (%r); dropping %d second(s) of tallies",
                    exc,
                    len(tallies),
                )


live_feed = LiveFeed()


def tally_history(
    *,
    rows: Iterable[tuple[float, int, float | None]],
    masses: Iterable[tuple[float, float]],
    since: int,
    until: int,
    bucket_seconds: int,
) -> list[Tally]:
    """Stored evaluations (finished at, status, total_ms) and answer label masses (finished at, mass), in
    Unix seconds, as tallies of `bucket_seconds` from `since` (aligned) to before `until`, oldest first;
    generations unknown (not stored)."""
    tallies: dict[int, Tally] = {}

    def bucket_of(at: float) -> Tally | None:
        if not since <= at < until:
            return None
        second = int(at) // bucket_seconds * bucket_seconds
        tally = tallies.get(second)
        if tally is None:
            tally = tallies[second] = Tally(second=second, generations=None)
        return tally

    for finished, status, total_ms in rows:
        tally = bucket_of(finished)
        if tally is not None:
            tally.add(status=status, total_ms=total_ms, masses=(), generations=0)
    for finished, mass in masses:
        tally = bucket_of(finished)
        if tally is not None:
            tally.label_mass[label_mass_bin(mass=mass)] += 1
    return [tallies[s] for s in sorted(tallies)]

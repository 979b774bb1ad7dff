"""The admin dashboard's live socket: the last hour from the database, then every second as it happens.

On connect (a staff user's admin session, from this site's own pages) the socket joins the dashboard
group, then sends a snapshot: the stored evaluations that finished in the last hour, before the
second it joined, as 10-second tallies (`audit.livefeed.tally_history`). From then on it
forwards each process's tally of each second (`audit.livefeed.LiveFeed`); the page adds the
tallies of that second and later to the snapshot, so nothing is counted twice or missed.

The session cookie authenticates the socket, so a page on another site must not be able to open it
in the user's name (cross-site WebSocket hijacking): the Origin must be this site's own origin, scheme, host
and port alike (a page over http is not the https site), or one of `CSRF_TRUSTED_ORIGINS`, as Django's CSRF
check requires for a form.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from audit.livefeed import (
    DASHBOARD_GROUP,
    LABEL_MASS_BINS,
    LATENCY_BUCKETS_PER_DECADE,
    tally_history,
)
from audit.models import Evaluation, EvaluationAnswer
from audit.permissions import VIEW_EVALUATIONS
from serving.hosts import origin_same, scope_host

HISTORY_SECONDS = 3600
BUCKET_SECONDS = 10
HISTORY_ROWS_MAX = 200_000
"""Newest stored evaluations read for the snapshot: an hour at 55 evaluations per second. Past that the
oldest part of the hour is left out (the page says so) rather than the socket taking seconds to open."""
STORE_GRACE_SECONDS = 0.5
"""Wait before reading the snapshot, so evaluations finished just before joining are in the database."""
CLOSE_FORBIDDEN = 4403


def origin_allowed(*, scope: dict[str, Any]) -> bool:
    """The socket's Origin is this site's own origin (scheme, host and port), or a trusted origin (Django's CSRF
    rules)."""
    headers = scope.get("headers", [])
    origin = dict(headers).get(b"origin", b"").decode("latin-1")
    host = scope_host(headers=headers, server=scope.get("server"))
    if not origin or not host:
        return False
    return origin_same(origin=origin, scheme=str(scope.get("scheme", "ws")), host=host) or origin in getattr(
        settings, "CSRF_TRUSTED_ORIGINS", ()
    )


def dashboard_snapshot(*, now: float, until: int) -> dict[str, Any]:
    """The stored evaluations that finished in the last hour, before `until` (Unix seconds), in the live
    feed's tally shape. Runs in a worker thread (ORM)."""
    since = (int(now) - HISTORY_SECONDS) // BUCKET_SECONDS * BUCKET_SECONDS
    # Rows are kept by start time; one that started up to a request timeout earlier may finish in the window.
    started = datetime.fromtimestamp(since - settings.OPENJEV.request_timeout, tz=UTC)
    stored = list(
        Evaluation.objects.filter(created_at__gte=started)
        .order_by("-created_at")
        .values_list("created_at", "status_code", "total_ms")[:HISTORY_ROWS_MAX]
    )
    truncated = len(stored) == HISTORY_ROWS_MAX
    oldest = stored[-1][0] if truncated else started
    rows = [(_finished(created, total), status, total) for created, status, total in stored]
    answers = EvaluationAnswer.objects.filter(evaluation__created_at__gte=oldest, label_mass__isnull=False).values_list(
        "evaluation__created_at", "evaluation__total_ms", "label_mass"
    )
    masses = ((_finished(created, total), mass) for created, total, mass in answers.iterator() if mass is not None)
    tallies = tally_history(rows=rows, masses=masses, since=since, until=until, bucket_seconds=BUCKET_SECONDS)
    return {
        "type": "snapshot",
        "now": now,
        "since": since,
        "until": until,
        "bucket_seconds": BUCKET_SECONDS,
        "span_seconds": HISTORY_SECONDS,
        "truncated_before": oldest.timestamp() if truncated else None,
        "latency_buckets_per_decade": LATENCY_BUCKETS_PER_DECADE,
        "label_mass_bins": LABEL_MASS_BINS,
        "tallies": [t.message() for t in tallies],
    }


def _finished(created: datetime, total_ms: float | None) -> float:
    return created.timestamp() + (total_ms or 0.0) / 1000.0


@database_sync_to_async
def _snapshot_load(*, until: int) -> dict[str, Any]:
    return dashboard_snapshot(now=time.time(), until=until)


@database_sync_to_async
def _user_allowed(user: Any) -> bool:
    return bool(user is not None and user.is_active and user.is_staff and user.has_perm(VIEW_EVALUATIONS))


class DashboardConsumer(AsyncJsonWebsocketConsumer):
    """`WS <admin>/evaluations/evaluation/dashboard/live`, behind channels' session and auth middleware."""

    joined = False

    async def connect(self) -> None:
        await self.accept()
        if not origin_allowed(scope=self.scope):
            await self.close(code=CLOSE_FORBIDDEN, reason="cross-origin dashboard socket refused")
            return
        if not await _user_allowed(self.scope.get("user")):
            await self.close(code=CLOSE_FORBIDDEN, reason="log in to the admin as staff who may view evaluations")
            return
        # Join first: every second from `until` on reaches this socket as a tally, and the snapshot holds
        # what finished before it (the writer stores a finished evaluation well within STORE_GRACE).
        await self.channel_layer.group_add(DASHBOARD_GROUP, self.channel_name)
        self.joined = True
        until = int(time.time())
        await asyncio.sleep(STORE_GRACE_SECONDS)
        await self.send_json(await _snapshot_load(until=until))

    async def disconnect(self, code: int) -> None:
        if self.joined:
            await self.channel_layer.group_discard(DASHBOARD_GROUP, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """The page sends nothing; whatever arrives is ignored."""

    async def dashboard_tick(self, event: dict[str, Any]) -> None:
        for tally in event["tallies"]:
            await self.send_json({"type": "tick", "tally": tally})

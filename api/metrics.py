"""`GET /metrics`: every metric of `serving.metrics` in Prometheus' text format, summed over the workers.

Not behind the API's keys (a scraper has none) but behind its own optional token, `OPENJEV_METRICS_TOKEN`
(Prometheus' `authorization` in the scrape config); without one, keep the route off the internet (see
docs/observability.md). Reading the workers' files is a few milliseconds of file reads, done in a worker thread
so a scrape never holds the event loop.
"""

from __future__ import annotations

import asyncio
import hmac
import tomllib
from functools import cache
from typing import Any, ClassVar

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4
from rest_framework.request import Request

from api.plumbing.api_error import ApiError
from api.plumbing.authentication import bearer_token
from api.views import ApiView
from batches.lifecycle import batches_queued
from serving import metrics
from serving.config import BASE_DIR
from serving.evaluator import evaluator_current
from serving.metrics import ScrapeCollector, metrics_exposition
from serving.workers import workers_state_current

BACKEND_CHECK_SECONDS = 3.0
"""How long a scrape waits for the backend's health check before taking it as down (a scrape times out at 10 s)."""


@cache
def version() -> str:
    """The project's version, from its one source (pyproject.toml)."""
    try:
        return str(tomllib.loads((BASE_DIR / "pyproject.toml").read_text())["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"


def _workers() -> tuple[int, int, int] | None:
    state = workers_state_current()
    return None if state is None else (state.up, state.configured, state.replaced)


async def backend_up_refresh() -> None:
    """`openjev_backend_up` as of this scrape: the check `/health` makes (which starts the evaluator's build, as a
    balancer's probe does), so the gauge is fresh where no balancer probes `/health` (compose's nginx does not)."""
    evaluator = evaluator_current()
    healthy = False
    if evaluator is not None:
        try:
            healthy = await asyncio.wait_for(evaluator.backend.health(), BACKEND_CHECK_SECONDS)
        except TimeoutError:
            healthy = False
    metrics.backend_up.set(1 if healthy else 0)


def scrape_collector() -> ScrapeCollector:
    config = settings.OPENJEV
    build = {"version": version(), "backend": config.backend, "model": config.served_model_name}
    return ScrapeCollector(build=build, workers=_workers, batches=batches_queued)


class MetricsView(ApiView):
    authentication_classes: ClassVar[list[Any]] = []

    @extend_schema(exclude=True)  # Prometheus' text format, documented in docs/observability.md
    async def get(self, request: Request) -> HttpResponse:
        token = settings.OPENJEV.metrics_token
        if token is not None:
            sent = bearer_token(request.headers.get("Authorization")) or ""
            if not hmac.compare_digest(sent.encode(), token.encode()):
                raise ApiError(
                    401,
                    "authentication_error",
                    "send Authorization: Bearer <OPENJEV_METRICS_TOKEN>",
                    {"WWW-Authenticate": "Bearer"},
                )
        await backend_up_refresh()
        body = await asyncio.to_thread(metrics_exposition, scrape=scrape_collector())
        return HttpResponse(body, content_type=CONTENT_TYPE_PLAIN_0_0_4)

"""`GET /v1/limits`, `/health` and `/health/live`: what the service takes and whether it is up. The health checks
need no key (load balancers probe without one) and name the model and the worker only to a valid key."""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import Any, ClassVar

from django.conf import settings
from django.http import HttpResponse
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from api.openapi import operations as doc
from api.plumbing.api_error import ApiError
from api.plumbing.authentication import caller_authenticate
from api.plumbing.evaluate import images_accepted
from api.plumbing.formats import bare_key_of, wire_formats
from api.plumbing.json_render import json_response
from api.views import ApiView
from audit.database import caches_age
from serving import metrics
from serving.evaluator import STARTUP_FAILED, evaluator_ready, evaluator_status
from serving.workers import workers_state_current


class LimitsView(ApiView):
    @doc.limits_schema
    async def get(self, request: Request) -> HttpResponse:
        c = settings.OPENJEV
        evaluator = evaluator_ready()  # read, never started here
        return json_response(
            body={
                "max_questions": c.max_questions,
                "max_answers_per_question": c.max_answers,
                "max_body_bytes": c.max_body_bytes,
                "max_images": images_accepted(),
                "max_image_bytes": c.max_image_bytes,
                # The backend's context may be smaller than the setting: what is enforced, once it is known.
                "max_input_tokens": c.max_input_tokens if evaluator is None else evaluator.budget.max_input_tokens,
                "max_total_input_tokens": c.max_total_input_tokens,
                "max_concurrent_requests": c.max_concurrent_requests,
                "max_concurrent_branches": c.max_concurrent_branches,
                "request_timeout_seconds": c.request_timeout,
                # What one request of a format may ask where the format's own rules differ.
                **{f.name: f.limits() for f in wire_formats() if f.limits is not None},
            }
        )


class HealthView(ApiView):
    authentication_classes: ClassVar[list[Any]] = []

    @doc.health_schema
    async def get(self, request: Request) -> HttpResponse:
        evaluator, startup_seconds, error = evaluator_status()
        backend = settings.OPENJEV.backend
        healthy = evaluator is not None and await evaluator.backend.health()
        metrics.backend_up.set(1 if healthy else 0)
        if evaluator is not None and healthy:
            body: dict[str, Any] = {
                "status": "ok",
                "backend": evaluator.backend.kind,
                "startup_seconds": startup_seconds,
            }
            if await _key_shown(request):
                body |= {"model": evaluator.backend.model, "worker_pid": os.getpid()}
                if (workers := workers_state_current()) is not None:
                    body["workers"] = asdict(workers)
                body["caches"] = caches_age()
            return json_response(body=body)
        body = {
            "status": "unavailable",
            "backend": backend,
            "startup_seconds": startup_seconds,
            "message": STARTUP_FAILED
            if error
            else ("the backend does not answer its health check" if evaluator else "starting"),
        }
        return json_response(body=body, status=503, headers={"Retry-After": "5"})


async def _key_shown(request: Request) -> bool:
    """Whether `/health` may name the model and the worker: always with auth off, else to a valid key only
    (load balancers probe without one, and learn only ready or not)."""
    if not settings.OPENJEV.auth_required:
        return True
    try:
        return (
            await caller_authenticate(
                authorization=request.headers.get("Authorization"), api_key=bare_key_of(header=request.headers.get)
            )
            is not None
        )
    except (AuthenticationFailed, ApiError):
        return False


class LiveView(ApiView):
    authentication_classes: ClassVar[list[Any]] = []

    @doc.live_schema
    async def get(self, request: Request) -> HttpResponse:
        return json_response(body={"status": "ok"})

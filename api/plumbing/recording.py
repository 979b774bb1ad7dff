"""One evaluation call, stored however it ends: answered, refused, failed or abandoned by its client.

Both endpoints run their work inside `evaluation_recorded`; what the block has established by the time
it ends (what was received, the evaluator that served it, the outcome) is stored with the status the
client got (a client that hung up counts as 499). Storing never raises and never waits for the database: the
block ends once the record is durable in the spool on disk (a group-committed sync, a fraction of a millisecond),
so an answer never leaves before its evaluation would survive a database outage or a SIGKILL. A spool that
cannot take it (full, or its disk failing) answers 503 under `OPENJEV_SPOOL_FULL=refuse`, and with `answer` lets
the answer go unstored, counted.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from api.plumbing.api_error import ApiError, problems_render
from api.plumbing.body_lane_places import BodyLaneFull
from api.plumbing.error_responses import api_error_of
from api.plumbing.metering import meter_evaluated, phase_timed
from api.plumbing.validation import Validated
from audit.callers import Caller
from audit.livefeed import live_feed
from audit.storage.records import Api, Failure, Received, StoredEvaluation
from audit.storage.spool import SpoolFull
from audit.storage.store import evaluation_store, spool_full, unstored_counted
from inference.errors import BackendFailed, BackendUnavailable, EvaluationTimeout, Overloaded
from inference.questions import QUESTION_TYPES
from inference.runner import Evaluator, Outcome
from serving import metrics
from serving.evaluator import evaluator_ready

log = logging.getLogger(__name__)

DURABLE_WAIT_SECONDS = 5.0
"""The most an answer waits for its evaluation's sync: a disk that takes longer is failing (then as if full)."""
SPOOL_FULL_MESSAGE = "the service cannot store evaluations right now; retry shortly"


@dataclass
class Recording:
    """What the call has established so far; the block fills it in as it goes."""

    request_id: str
    caller: Caller | None
    unparsed: Callable[[], Received]
    """What the body claims, for a call that fails before its request is parsed."""
    received: Received | None = None
    """The parsed request, once there is one."""
    evaluator: Evaluator | None = None
    outcome: Outcome | None = None
    created_at: datetime = field(default_factory=timezone.now)
    started: float = field(default_factory=time.perf_counter)


def received_of_body(
    *, data: Any, api: Api, state: str, keyed: bool, kinds: Mapping[str, str] | None = None
) -> Received:
    """What a body claims to ask, read from its JSON: for the audit of a request that could not be parsed. Each
    format says where it keeps what: `state`, the field of its state; `keyed`, its questions are an object keyed
    by id (else a list); `kinds`, its question types as the core names them (None: the core's own names)."""
    body = data if isinstance(data, dict) else {}
    model, questions = body.get("model"), body.get("questions")
    if keyed:
        asked = list(questions.values()) if isinstance(questions, dict) else []
    else:
        asked = questions if isinstance(questions, list) else []
    named: Mapping[str, str] = kinds if kinds is not None else {kind: kind for kind in QUESTION_TYPES}
    claimed = (q.get("type") for q in asked if isinstance(q, dict))
    return Received(
        requested_model=model if isinstance(model, str) else "",
        question_count=len(asked),
        question_types=tuple(sorted({named[kind] for kind in claimed if isinstance(kind, str) and kind in named})),
        state=body.get(state),
        questions=questions,
        api=api,
    )


def failure_of(*, error: BaseException) -> Failure:
    """The failure as stored: the status and type the client got; the message operators need."""
    api = api_error_of(error)
    return Failure(
        status=api.status,
        error_type=api.error_type,
        message=api.internal or api.message,
        detail=problems_render(api.problems) if api.problems else None,
    )


def _stored(recording: Recording, *, error: BaseException | None) -> concurrent.futures.Future[bool] | None:
    """Hand the call to storage and count it for the live dashboard (at every storage level); never
    raises. What it returns resolves once the record is durable (None: nothing to wait for)."""
    try:
        # A request refused before it asked for the evaluator still names the one running, if any.
        evaluator = recording.evaluator or evaluator_ready()
        config = settings.OPENJEV
        record = StoredEvaluation(
            request_id=recording.request_id,
            created_at=recording.created_at,
            level=config.store_evaluations,
            caller=recording.caller,
            received=recording.received or recording.unparsed(),
            served_model=evaluator.backend.model if evaluator else "",
            backend=evaluator.backend.kind if evaluator else config.backend,
            total_ms=(time.perf_counter() - recording.started) * 1000.0,
            outcome=recording.outcome,
            failure=None if error is None else failure_of(error=error),
        )
        # Spooled first: the live feed and the metrics are counted while the spool's thread syncs it to disk.
        durable = evaluation_store(record=record)
        live_feed.record(status=record.status, total_ms=record.total_ms, outcome=record.outcome)
        received = record.received
        meter_evaluated(
            outcome=record.outcome,
            requested_model=received.requested_model,
            served_model=record.served_model,
            questions=received.question_count,
            refusal_below=received.refusal_below,
        )
        if error is not None:
            failure_counted(error=error)
        return durable
    except Exception:
        log.exception("could not describe evaluation %s for storage", recording.request_id)
        return None


async def durable_awaited(*, durable: concurrent.futures.Future[bool] | None, refuse: bool) -> None:
    """Wait (timed as phase `store`) until the record is on disk; a spool that cannot take it raises the 503 of
    `OPENJEV_SPOOL_FULL=refuse` where `refuse` (an answer; a failed call keeps its own error), else counts it."""
    if durable is None:
        return
    try:
        with phase_timed("store"):
            await asyncio.wait_for(asyncio.wrap_future(durable), DURABLE_WAIT_SECONDS)
        return
    except (SpoolFull, TimeoutError):
        pass
    if refuse and settings.OPENJEV.spool_full == "refuse":
        raise ApiError(503, "service_unavailable", SPOOL_FULL_MESSAGE, {"Retry-After": "5"})
    unstored_counted()


def spool_admitted() -> None:
    """Refuse a new evaluation up front while the spool is full and the policy says so (503, retryable)."""
    if settings.OPENJEV.spool_full == "refuse" and spool_full():
        raise ApiError(503, "service_unavailable", SPOOL_FULL_MESSAGE, {"Retry-After": "5"})


@asynccontextmanager
async def evaluation_recorded(
    *, request_id: str, caller: Caller | None, unparsed: Callable[[], Received]
) -> AsyncIterator[Recording]:
    """Store the call when the block ends: answered if it set `outcome`, else failed with its exception; the
    block ends once the record is durable (a client that hung up waits for nothing)."""
    spool_admitted()
    recording = Recording(request_id=request_id, caller=caller, unparsed=unparsed)
    metrics.evaluations_in_flight.inc()
    try:
        yield recording
    except Validated:
        raise  # a batch line checked, not asked: nothing to store
    except asyncio.CancelledError as exc:
        _stored(recording, error=exc)
        raise
    except Exception as exc:
        await durable_awaited(durable=_stored(recording, error=exc), refuse=False)
        raise
    finally:
        metrics.evaluations_in_flight.dec()
    assert recording.outcome is not None, "an answered call sets its outcome"
    await durable_awaited(durable=_stored(recording, error=None), refuse=True)
    label_mass_check(outcome=recording.outcome, request_id=request_id)


BACKEND_FAILURES: tuple[tuple[type[BaseException], str], ...] = (
    (BackendUnavailable, "unavailable"),
    (EvaluationTimeout, "timeout"),
    (BackendFailed, "failed"),
)
"""The backend's failures as `openjev_backend_errors_total` names their kinds."""


def failure_counted(*, error: BaseException) -> None:
    """A failed evaluation in the metrics: the backend's failure by kind, or the admission limit's 529."""
    if isinstance(error, Overloaded):
        if not isinstance(error, BodyLaneFull):  # the lane counts its own
            metrics.overloaded_total.labels("evaluations").inc()
        return
    kind = next((name for cls, name in BACKEND_FAILURES if isinstance(error, cls)), None)
    if kind is not None:
        metrics.backend_errors_total.labels(kind).inc()


def label_mass_check(*, outcome: Outcome, request_id: str) -> None:
    """Warn when the model barely answered with a label: such an answer is a ratio of leftovers
    (a prompt or tokenizer mismatch, or a question the model reads as open-ended)."""
    threshold = settings.OPENJEV.label_mass_warn
    low = [a for a in outcome.answers if a.label_mass < threshold]
    if low:
        log.warning(
            "%s: label mass under %.2f for %s",
            request_id,
            threshold,
            ", ".join(f"{a.question_id!r} ({a.label_mass:.3f})" for a in low[:5]),
        )

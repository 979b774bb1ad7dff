"""Business logic behind the API views: one evaluation, with its id, timing and outcome."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils import timezone

from evaluations.engine import engine_get, engine_ready
from evaluations.parsing import EvaluationRequest, Limits, request_parse
from evaluations.storage import evaluation_store
from inference.runner import Engine, Outcome, evaluation_run
from inference.streaming import AnswerSink

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Served:
    request_id: str
    request: EvaluationRequest
    model: str
    outcome: Outcome
    backend: str = ""


def request_id_new() -> str:
    return f"req_{uuid.uuid4().hex}"


def models_accepted() -> frozenset[str]:
    config = settings.OPENJEV
    return frozenset({config.model_alias, config.model, config.served_model_name})


async def systemone_evaluate(*, data: Any, request_id: str, api_key: str | None,
                             on_answer: AnswerSink | None = None) -> Served:
    """Validate (422), then evaluate on the process's engine (529/503/502/504 as InferenceErrors);
    `on_answer` gets each answer as soon as it is scored (the WebSocket stream).

    Every call is handed to `evaluation_store`, answered or failed (a client that hung up counts as
    499), with the status the client gets; storing never raises and never waits for the database.
    """
    config = settings.OPENJEV
    created_at = timezone.now()
    started = time.perf_counter()
    engine: Engine | None = None
    try:
        request = request_parse(data=data, limits=Limits(config.max_questions, config.max_answers),
                                models=models_accepted())
        engine = await engine_get()
        outcome = await evaluation_run(engine=engine, state=request.state, questions=request.questions,
                                       on_answer=on_answer)
    except (Exception, asyncio.CancelledError) as exc:
        engine = engine or engine_ready()  # a 422 before the engine was asked for still names it if it runs
        evaluation_store(request_id=request_id, created_at=created_at, api_key=api_key, data=data,
                         served_model=engine.backend.model if engine else "",
                         backend=engine.backend.kind if engine else config.backend,
                         total_ms=(time.perf_counter() - started) * 1000.0, error=exc)
        raise
    evaluation_store(request_id=request_id, created_at=created_at, api_key=api_key, data=data,
                     served_model=engine.backend.model, backend=engine.backend.kind,
                     total_ms=(time.perf_counter() - started) * 1000.0, outcome=outcome)
    label_mass_check(outcome=outcome, request_id=request_id)
    return Served(request_id=request_id, request=request, model=engine.backend.model, outcome=outcome,
                  backend=engine.backend.kind)


def label_mass_check(*, outcome: Outcome, request_id: str) -> None:
    """Warn when the model barely answered with a label: such an answer is a ratio of leftovers
    (a prompt or tokenizer mismatch, or a question the model reads as open-ended)."""
    threshold = settings.OPENJEV.label_mass_warn
    low = [a for a in outcome.answers if a.label_mass < threshold]
    if low:
        log.warning("%s: label mass under %.2f for %s", request_id, threshold,
                    ", ".join(f"{a.question_id!r} ({a.label_mass:.3f})" for a in low[:5]))

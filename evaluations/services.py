"""Business logic behind the API views: one evaluation, with its id, timing and outcome."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from evaluations.engine import engine_get
from evaluations.parsing import EvaluationRequest, Limits, request_parse
from inference.runner import Outcome, evaluation_run


@dataclass(frozen=True)
class Served:
    request_id: str
    request: EvaluationRequest
    model: str
    outcome: Outcome


def request_id_new() -> str:
    return f"req_{uuid.uuid4().hex}"


def models_accepted() -> frozenset[str]:
    config = settings.OPENJEV
    return frozenset({config.model_alias, config.model, config.served_model_name})


async def systemone_evaluate(*, data: Any, request_id: str, api_key: str | None) -> Served:
    """Validate (422), then evaluate on the process's engine (529/503/502/504 as InferenceErrors)."""
    config = settings.OPENJEV
    request = request_parse(data=data, limits=Limits(config.max_questions, config.max_answers),
                            models=models_accepted())
    engine = await engine_get()
    outcome = await evaluation_run(engine=engine, state=request.state, questions=request.questions)
    return Served(request_id=request_id, request=request, model=engine.backend.model, outcome=outcome)

"""Business logic behind the API views: one evaluation, with its id, timing and outcome."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.conf import settings

from evaluations.engine import engine_get
from evaluations.parsing import EvaluationRequest
from inference.runner import Outcome, evaluation_run


@dataclass(frozen=True)
class Served:
    request_id: str
    model: str
    outcome: Outcome


def request_id_new() -> str:
    return f"req_{uuid.uuid4().hex}"


def models_accepted() -> frozenset[str]:
    config = settings.OPENJEV
    return frozenset({config.model_alias, config.model, config.served_model_name})


async def systemone_evaluate(*, request: EvaluationRequest, request_id: str, api_key: str | None) -> Served:
    engine = await engine_get()
    outcome = await evaluation_run(engine=engine, state=request.state, questions=request.questions)
    return Served(request_id=request_id, model=engine.backend.model, outcome=outcome)

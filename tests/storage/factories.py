"""Stored evaluations made through the real writer path (row building + insert), without the API."""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Any

from django.utils import timezone

from evaluations.storage import _EvaluationJob, _rows_insert, evaluation_rows_build
from inference.runner import Outcome, Timings, Usage
from inference.scoring import Answer
from tests.conftest import README_REQUEST

_ids = itertools.count()


def outcome_make(*, team: dict[str, float] | None = None, total: float = 10.0) -> Outcome:
    team = team or {"Billing": 0.7, "Technical": 0.2, "Sales": 0.1}
    choice = max(team, key=lambda k: team[k])
    answers = (
        Answer("refund", {"type": "noul", "noul": 0.8}, (0.8, 0.2)),
        Answer("team", {"type": "choice", "choice": choice, "probabilities": team, "confidence": 0.42},
               tuple(team.values())),
        Answer("anger", {"type": "score", "score": 1.3, "legend": {"0": "Calm", "1": "Frustrated", "2": "Very angry"},
                         "probabilities": {"0": 0.2, "1": 0.3, "2": 0.5}, "confidence": 0.11}, (0.2, 0.3, 0.5)),
    )
    return Outcome(answers=answers, usage=Usage(321, 4), prefix_tokens=120, cached_tokens=360,
                   timings=Timings(prepare_ms=0.5, prefill_ms=total / 3, branches_ms=total / 2))


def evaluation_make(*, status: int = 200, created_at: datetime | None = None, total_ms: float = 10.0,
                    api_key: str | None = None, level: str = "full", data: Any = None,
                    model: str = "Qwen/Qwen3.6-35B-A3B", outcome: Outcome | None = None,
                    error_message: str = "") -> str:
    """Insert one evaluation (sync, on the calling thread's connection); returns its request id."""
    request_id = f"req_test{next(_ids):06d}{timezone.now().timestamp():.0f}"
    job = _EvaluationJob(
        request_id=request_id, created_at=created_at or timezone.now(), level=level, api_key=api_key,
        data=README_REQUEST if data is None else data, served_model=model, backend="sglang", total_ms=total_ms,
        status=status, error_type={200: "", 422: "validation_error", 529: "overloaded", 502: "backend_error"}
        .get(status, "internal_error"), error_message=error_message or ("" if status == 200 else "it failed"),
        outcome=(outcome or outcome_make(total=total_ms)) if status == 200 else None)
    _rows_insert([evaluation_rows_build(job=job)])
    return request_id

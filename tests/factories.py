"""Stored evaluations made through the real writer path (row building + insert), without the API."""

from __future__ import annotations

import itertools
import math
from datetime import datetime
from typing import Any

from django.utils import timezone

from api.plumbing.recording import received_of_body
from audit.callers import Caller
from audit.models import ApiKey
from audit.storage.records import Failure, StoredEvaluation
from audit.storage.rows import evaluation_rows_build
from audit.storage.sql import rows_insert
from inference.questions import question_build
from inference.runner import Outcome, Timings, Usage
from inference.scoring import Answer, BranchScore, answer_compute
from serving.config import StoreLevel
from tests.conftest import README_REQUEST

_ids = itertools.count()


LABEL_MASS = 0.97


def answer_make(*, question_id: str, probabilities: tuple[float, ...]) -> Answer:
    """The README question's answer as the core computes it from these label probabilities."""
    q = README_REQUEST["questions"][question_id]
    question = question_build(
        id=question_id, type=q["type"], instructions=q.get("instructions"), criteria=q.get("criteria")
    )
    branch = BranchScore(
        order=tuple(range(len(probabilities))), label_logprobs=tuple(math.log(p * LABEL_MASS) for p in probabilities)
    )
    return answer_compute(question=question, branches=[branch], temperature=1.0, confidence="entropy")


def outcome_make(*, team: dict[str, float] | None = None, total: float = 10.0) -> Outcome:
    team = team or {"Billing": 0.7, "Technical": 0.2, "Sales": 0.1}
    answers = (
        answer_make(question_id="refund", probabilities=(0.8, 0.2)),
        answer_make(question_id="team", probabilities=tuple(team[k] for k in ("Billing", "Technical", "Sales"))),
        answer_make(question_id="anger", probabilities=(0.2, 0.3, 0.5)),
    )
    return Outcome(
        answers=answers,
        usage=Usage(321, 4),
        prefix_tokens=120,
        cached_tokens=360,
        timings=Timings(prepare_ms=0.5, prefill_ms=total / 3, branches_ms=total / 2),
        generations=4,
    )


def evaluation_make(
    *,
    status: int = 200,
    created_at: datetime | None = None,
    total_ms: float = 10.0,
    key_label: str | None = None,
    level: StoreLevel = "full",
    data: Any = None,
    model: str = "Qwen/Qwen3.6-35B-A3B",
    outcome: Outcome | None = None,
    error_message: str = "",
) -> str:
    """Insert one evaluation (sync, on the calling thread's connection); returns its request id. `data` is
    the body as received; `key_label` the label of the key that made it."""
    request_id = f"req_test{next(_ids):06d}{timezone.now().timestamp():.0f}"
    failure = (
        None
        if status == 200
        else Failure(
            status=status,
            error_type={422: "validation_error", 529: "overloaded", 502: "backend_error"}.get(status, "internal_error"),
            message=error_message or "it failed",
        )
    )
    record = StoredEvaluation(
        request_id=request_id,
        created_at=created_at or timezone.now(),
        level=level,
        caller=_caller(key_label),
        received=received_of_body(
            data=README_REQUEST if data is None else data, api="systemone", state="state", keyed=True
        ),
        served_model=model,
        backend="sglang",
        total_ms=total_ms,
        outcome=(outcome or outcome_make(total=total_ms)) if failure is None else None,
        failure=failure,
    )
    rows_insert([evaluation_rows_build(record=record)])
    return request_id


def _caller(label: str | None) -> Caller | None:
    """The caller a key label stands for (an issued key's row, if it still exists)."""
    if label is None:
        return None
    key = ApiKey.objects.filter(prefix=label.removeprefix("oj_")).first() if label.startswith("oj_") else None
    return Caller(label=label, key_id=key.pk if key else None)

"""Typed answers in the Decisions API's response: answers in question order, usage, headers."""

from __future__ import annotations

from typing import Any

from api.decisions.questions import Asked
from api.decisions.service import Decided
from api.plumbing.headers import served_headers_common
from calibration.applied import calibrated_header
from inference.scoring import Answer


def answer_render(*, answer: Answer, asked: Asked, refused: bool) -> dict[str, Any]:
    """`predicate` P(true); `choice` the most likely value, with every value's probability; `score` the
    expected level index; `refusal` when the model barely answered with a label."""
    if refused:
        return {"type": "refusal", "name": asked.name}
    p = answer.probabilities
    kind = answer.question.type
    if kind == "noul":
        return {"type": "predicate", "name": asked.name, "probability": p[0]}
    if kind == "choice":
        return {
            "type": "choice",
            "name": asked.name,
            "choice": asked.values[answer.choice_index],
            "confidence": answer.confidence,
            "probabilities": [{"value": v, "probability": x} for v, x in zip(asked.values, p, strict=True)],
        }
    return {
        "type": "score",
        "name": asked.name,
        "score": answer.score,
        "confidence": answer.confidence,
        "probabilities": [
            {"value": i, "label": label, "probability": x}
            for i, (label, x) in enumerate(zip(asked.labels, p, strict=True))
        ],
    }


def decided_render(*, decided: Decided) -> dict[str, Any]:
    """The response: `usage` counts every prompt token the backend read (warm-up and questions); cache
    writes and reasoning are not reported by the backends, so they are 0."""
    outcome = decided.outcome
    usage = outcome.usage
    return {
        "answers": [
            answer_render(answer=a, asked=asked, refused=a.label_mass < decided.refusal_below)
            for a, asked in zip(outcome.answers, decided.request.asked, strict=True)
        ],
        "model": decided.request.model,
        "usage": {
            "input_tokens": usage.input_tokens,
            "input_tokens_details": {"cached_tokens": outcome.cached_tokens or 0, "cache_write_tokens": 0},
            "output_tokens": usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.input_tokens + usage.output_tokens,
        },
    }


def decided_headers(*, decided: Decided) -> dict[str, str]:
    """System One's headers (request id, served model, tokens, label mass, timing, calibrated answers),
    and the request id as OpenAI's `x-request-id`."""
    headers = served_headers_common(request_id=decided.request_id, model=decided.model, outcome=decided.outcome)
    return {**headers, "x-request-id": decided.request_id} | calibrated_header(answers=decided.outcome.answers)

"""System One's answers rendered (the only place that knows their JSON shape): `answers` under the
caller's ids, usage, and the response headers."""

from __future__ import annotations

from typing import Any

from api.plumbing.headers import served_headers_common
from api.systemone.service import Served
from calibration.applied import calibrated_header
from inference.scoring import Answer


def answer_render(*, answer: Answer) -> dict[str, Any]:
    """`noul` P(true); `choice` argmax key, probabilities, confidence; `score` expectation, legend, ..."""
    question = answer.question
    p = answer.probabilities
    if question.type == "noul":
        return {"type": "noul", "noul": p[0]}
    if question.type == "choice":
        keys = [o.key for o in question.options]
        return {
            "type": "choice",
            "choice": keys[answer.choice_index],
            "probabilities": dict(zip(keys, p, strict=True)),
            "confidence": answer.confidence,
        }
    return {
        "type": "score",
        "score": answer.score,
        "legend": {str(i): level for i, level in enumerate(question.levels)},
        "probabilities": {str(i): x for i, x in enumerate(p)},
        "confidence": answer.confidence,
    }


def served_render(*, served: Served) -> dict[str, Any]:
    """The System One response: the model as requested, answers under the caller's ids, usage."""
    outcome = served.outcome
    return {
        "model": served.request.model,
        "answers": {a.question_id: answer_render(answer=a) for a in outcome.answers},
        "usage": {"input_tokens": outcome.usage.input_tokens, "output_tokens": outcome.usage.output_tokens},
    }


def served_headers(*, served: Served) -> dict[str, str]:
    """Request id, served model, token counts, the lowest label mass, `Server-Timing` and which answers
    were calibrated."""
    headers = served_headers_common(request_id=served.request_id, model=served.model, outcome=served.outcome)
    return headers | calibrated_header(answers=served.outcome.answers)

"""Typed answers in Google's Decisions response: answers under the caller's question ids, usage, headers.

The probabilities are System One's for the same question, as served (calibrated where a calibration is active);
what Google defines differently is computed from them here:

- `noul` is P(true) kept within [0.01, 0.99], the range Google's API promises;
- `confidence` is, on every answer, "the calibrated probability of the winning outcome": max(noul, 1 − noul) for a
  noul, the top probability for a choice or a score (System One's `confidence` is another figure: how peaked the
  distribution is);
- a score's `probabilities` and `legend` are keyed by level index, `"0"` to `"n-1"`.
"""

from __future__ import annotations

from typing import Any

from api.google.service import GoogleDecided
from api.plumbing.headers import served_headers_common
from calibration.applied import calibrated_header
from inference.scoring import Answer

NOUL_MIN, NOUL_MAX = 0.01, 0.99
"""Google's range of a noul answer."""


def answer_render(*, answer: Answer) -> dict[str, Any]:
    question = answer.question
    p = answer.probabilities
    if question.type == "noul":
        noul = min(max(p[0], NOUL_MIN), NOUL_MAX)
        return {"type": "noul", "noul": noul, "confidence": max(noul, 1.0 - noul)}
    top = answer.choice_index
    if question.type == "choice":
        keys = [o.key for o in question.options]
        return {
            "type": "choice",
            "choice": keys[top],
            "confidence": p[top],
            "probabilities": dict(zip(keys, p, strict=True)),
        }
    return {
        "type": "score",
        "score": answer.score,
        "confidence": p[top],
        "probabilities": {str(i): x for i, x in enumerate(p)},
        "legend": {str(i): level for i, level in enumerate(question.levels)},
    }


def decided_render(*, decided: GoogleDecided) -> dict[str, Any]:
    """The response: answers under the caller's ids, `usage` in Google's fields (every prompt token the backend
    read, the warm-up and every question; one output position per question and the warm-up; the backend's prefix
    cache hits), and the model as requested, which Google's clients keep as an extra field."""
    outcome = decided.outcome
    usage = outcome.usage
    counted: dict[str, Any] = {
        "total_input_tokens": usage.input_tokens,
        "total_output_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "total_cached_tokens": outcome.cached_tokens or 0,
    }
    if not decided.request.evaluation.images:
        # The backends count prompt tokens without telling text from image tokens: a split is given only when
        # there is nothing to split.
        counted["input_tokens_by_modality"] = [{"modality": "text", "tokens": usage.input_tokens}]
    return {
        "answers": {a.question_id: answer_render(answer=a) for a in outcome.answers},
        "usage": counted,
        "model": decided.request.model,
    }


def decided_headers(*, decided: GoogleDecided) -> dict[str, str]:
    """System One's headers: request id, served model, tokens, label mass, timing, calibrated answers (the path's
    `x-request-id` is added with the request id on every response of `/v1/decisions`)."""
    headers = served_headers_common(request_id=decided.request_id, model=decided.model, outcome=decided.outcome)
    return headers | calibrated_header(answers=decided.outcome.answers)

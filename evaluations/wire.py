"""Typed answers rendered in the two response formats (the only place that knows their JSON shapes):
System One's `answers` and usage, and the SGLang / vLLM classification response."""

from __future__ import annotations

from typing import Any

from evaluations.calibrations import calibrated_header
from evaluations.classify.service import Classified
from evaluations.systemone import Served
from inference.runner import Outcome
from inference.scoring import Answer


def answer_render(*, answer: Answer) -> dict[str, Any]:
    """`noul` P(true); `choice` argmax key, probabilities, confidence; `score` expectation, legend, ..."""
    question = answer.question
    p = answer.probabilities
    if question.type == "noul":
        return {"type": "noul", "noul": p[0]}
    if question.type == "choice":
        keys = [o.key for o in question.options]
        return {"type": "choice", "choice": keys[answer.choice_index],
                "probabilities": dict(zip(keys, p, strict=True)), "confidence": answer.confidence}
    return {"type": "score", "score": answer.score,
            "legend": {str(i): level for i, level in enumerate(question.levels)},
            "probabilities": {str(i): x for i, x in enumerate(p)}, "confidence": answer.confidence}


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


def served_headers_common(*, request_id: str, model: str, outcome: Outcome) -> dict[str, str]:
    """The headers of an evaluation on every wire format: request id, served model, token counts, the
    lowest label mass and `Server-Timing`."""
    t = outcome.timings
    headers = {
        "x-typesafe-request-id": request_id,
        "x-openjev-model": model,
        "x-openjev-prefix-tokens": str(outcome.prefix_tokens),
        "x-openjev-label-mass": label_mass_header(answers=outcome.answers),
        "Server-Timing": f"prepare;dur={t.prepare_ms:.2f}, prefill;dur={t.prefill_ms:.2f}, "
                         f"branches;dur={t.branches_ms:.2f}",
    }
    if outcome.cached_tokens is not None:
        headers["x-openjev-cached-tokens"] = str(outcome.cached_tokens)
    return headers


def label_mass_header(*, answers: tuple[Answer, ...]) -> str:
    """`x-openjev-label-mass`: the lowest label mass of the request's answers, the one to worry about."""
    return f"{min(a.label_mass for a in answers):.4f}"


def classified_render(*, classified: Classified) -> dict[str, Any]:
    """The SGLang / vLLM response: `usage.prompt_tokens` counts every token the backend read (warm-ups
    and branches, cache hits included); no tokens are generated for the caller."""
    tokens = classified.outcome.usage.input_tokens
    return {
        "id": classified.request_id,
        "object": "list",
        "created": classified.created,
        "model": classified.classifier.name,
        "data": [{"index": item.index, "label": item.label, "probs": list(item.probs),
                  "num_classes": len(item.probs)} for item in classified.items],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens, "completion_tokens": 0,
                  "prompt_tokens_details": None},
    }

"""Typed answers rendered in the System One wire format (the only place that knows its JSON shape)."""

from __future__ import annotations

from typing import Any

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


def label_mass_header(*, answers: tuple[Answer, ...]) -> str:
    """`x-openjev-label-mass`: the lowest label mass of the request's answers, the one to worry about."""
    return f"{min(a.label_mass for a in answers):.4f}"

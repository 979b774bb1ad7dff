"""Label log-probs to typed answers: renormalise over the labels, then shape each type.

The backend's log-probs are over the whole vocabulary; only their ratios among the labels mean
anything here, so they are renormalised with a stable softmax (temperature applied first).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from inference.errors import BackendFailed
from inference.questions import Question

ConfidenceFormula = Literal["entropy", "typesafe"]


@dataclass(frozen=True)
class Answer:
    question_id: str
    body: dict[str, Any]
    probabilities: tuple[float, ...]


def probabilities_compute(*, logprobs: Sequence[float], temperature: float) -> list[float]:
    """Stable softmax of logprobs/temperature; -inf is allowed (probability 0), NaN is not."""
    if any(math.isnan(x) or x == math.inf for x in logprobs):
        raise BackendFailed("the backend returned a NaN or +inf log-prob")
    scaled = [x / temperature for x in logprobs]
    top = max(scaled)
    if top == -math.inf:
        raise BackendFailed("the backend gave every label a log-prob of -inf")
    weights = [math.exp(x - top) for x in scaled]
    total = math.fsum(weights)
    return [w / total for w in weights]


def label_argmax(p: Sequence[float]) -> int:
    """The most probable label; ties go to the first, as the wire contract says."""
    best = 0
    for i, value in enumerate(p):
        if value > p[best]:
            best = i
    return best


def _entropy_confidence(p: Sequence[float]) -> float:
    n = len(p)
    entropy = -math.fsum(x * math.log(x) for x in p if x > 0)
    return min(1.0, max(0.0, 1.0 - entropy / math.log(n)))


def choice_confidence(*, p: Sequence[float], formula: ConfidenceFormula) -> float:
    if formula == "entropy":
        return _entropy_confidence(p)
    n = len(p)
    return min(1.0, max(0.0, (n * max(p) - 1) / (n - 1)))


def score_confidence(*, p: Sequence[float], formula: ConfidenceFormula) -> float:
    if formula == "entropy":
        return _entropy_confidence(p)
    n = len(p)
    mode = label_argmax(p)
    # TypeSafe normalises by a uniform distribution's mean distance from the middle level, which
    # is what the ecosystem's conformance suite (jevcompat) checks against.
    uniform_spread = sum(abs(i - (n - 1) / 2) for i in range(n)) / n
    spread = math.fsum(x * abs(i - mode) for i, x in enumerate(p))
    return min(1.0, max(0.0, 1.0 - spread / uniform_spread))


def answer_compute(*, question: Question, logprobs: Sequence[float], temperature: float,
                   confidence: ConfidenceFormula) -> Answer:
    p = probabilities_compute(logprobs=logprobs, temperature=temperature)
    if question.type == "noul":
        body: dict[str, Any] = {"type": "noul", "noul": p[0]}
    elif question.type == "choice":
        keys = [o.key for o in question.options]
        body = {"type": "choice", "choice": keys[label_argmax(p)], "probabilities": dict(zip(keys, p, strict=True)),
                "confidence": choice_confidence(p=p, formula=confidence)}
    else:
        body = {"type": "score", "score": math.fsum(i * x for i, x in enumerate(p)),
                "legend": {str(i): level for i, level in enumerate(question.levels)},
                "probabilities": {str(i): x for i, x in enumerate(p)},
                "confidence": score_confidence(p=p, formula=confidence)}
    return Answer(question_id=question.id, body=body, probabilities=tuple(p))

"""Fitting a temperature to labelled answers, so probabilities mean roughly what they say.

Temperature scaling (Guo et al. 2017) divides the label logits by one number T: it never changes
which option wins, only how sure the answer claims to be, and one parameter cannot overfit a few
hundred labels. T is chosen by minimising the log loss of the labelled answers; the loss is
unimodal in log T for all practical purposes, so a golden-section search finds it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from inference.metrics import Scored
from inference.questions import Question
from inference.scoring import BranchScore, answer_compute

T_MIN, T_MAX = 0.05, 20.0

Labelled = tuple[Question, Sequence[BranchScore], int]
"""One labelled answer as the core computed it: its question, its branches and the true option."""


def scored_at(*, items: Sequence[Labelled], temperature: float) -> list[Scored]:
    """The answers recomputed at `temperature` (debiasing and option orders as when served)."""
    return [
        Scored(
            probabilities=answer_compute(
                question=q, branches=b, temperature=temperature, confidence="entropy"
            ).probabilities,
            label=label,
        )
        for q, b, label in items
    ]


def log_loss_at(*, items: Sequence[Labelled], temperature: float) -> float:
    scored = scored_at(items=items, temperature=temperature)
    return -math.fsum(math.log(max(s.probabilities[s.label], 1e-12)) for s in scored) / len(scored)


def minimum_find(*, loss: Callable[[float], float], low: float, high: float, steps: int = 40) -> float:
    """Golden-section search for the minimum of a unimodal `loss` on [low, high]."""
    ratio = (math.sqrt(5) - 1) / 2
    a, b = low, high
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = loss(c), loss(d)
    for _ in range(steps):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = loss(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = loss(d)
    return (a + b) / 2


def temperature_fit(*, items: Sequence[Labelled]) -> float:
    """The temperature that minimises the items' log loss (searched on a log scale)."""
    log_t = minimum_find(
        loss=lambda x: log_loss_at(items=items, temperature=math.exp(x)), low=math.log(T_MIN), high=math.log(T_MAX)
    )
    return math.exp(log_t)

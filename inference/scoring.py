"""Label log-probs to typed answers: debias, renormalise over the labels, average option orders.

The backend's log-probs are over the whole vocabulary. Their sum over the labels (the label mass)
says whether the model was answering with a label at all: near 1 when the prompt is right. Only
their ratios mean anything for the answer, so they are renormalised with a stable softmax
(temperature applied first). Debiasing (contextual calibration, Zhao et al. 2021) first divides out
the question's own label preference, measured on a content-free state; with several option orders,
each order's distribution is mapped back to the options and the orders are averaged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from inference.errors import BackendFailed
from inference.questions import Question
from inference.tuning import ShapeTuning, Tuning

ConfidenceFormula = Literal["entropy", "typesafe"]


@dataclass(frozen=True)
class Scoring:
    """How answers are scored: the confidence formula, and per question shape the temperature,
    debiasing and option orders (`inference.tuning`)."""

    confidence: ConfidenceFormula
    tuning: Tuning

    def of(self, question: Question) -> ShapeTuning:
        return self.tuning.of(question)

    def permutations(self, question: Question) -> int:
        """Option orders asked for `question` (what `plan_compile` reads per question)."""
        return self.tuning.of(question).permutations


@dataclass(frozen=True)
class BranchScore:
    """What one branch read: its option order, the label log-probs and, when debiasing, the prior's."""

    order: tuple[int, ...]
    label_logprobs: tuple[float, ...]
    prior_logprobs: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Answer:
    """One question's answer, typed; the HTTP layer renders it in the wire format."""

    question: Question
    probabilities: tuple[float, ...]
    """Per option, in the question's order: what is served (debiased, tempered, orders averaged)."""
    raw_probabilities: tuple[float, ...]
    """Per option: the label log-probs renormalised as they came (no debiasing, temperature 1)."""
    label_mass: float
    """Summed probability of the labels before renormalising, averaged over the option orders."""
    confidence: float | None
    """How peaked `probabilities` is (choice and score; None for noul)."""
    branches: tuple[BranchScore, ...]
    uncalibrated: tuple[float, ...] | None = None
    """`probabilities` before a fitted per-question calibration (`inference.vector_scaling`); None when
    no calibration was applied."""
    calibration: int | None = None
    """Which stored calibration produced `probabilities` (its id, for the audit); None: none did."""

    @property
    def question_id(self) -> str:
        return self.question.id

    @property
    def choice_index(self) -> int:
        return label_argmax(self.probabilities)

    @property
    def score(self) -> float:
        """The expected level, Σ i·p_i over the probabilities as served: exactly the decimal their six-decimal
        values give (`probabilities_served`), so a reader can check it against them to the last digit."""
        return round(math.fsum(i * x for i, x in enumerate(self.probabilities)), PROBABILITY_DECIMALS)


PROBABILITY_DECIMALS = 6
_UNIT = 10**PROBABILITY_DECIMALS


def probabilities_served(p: Sequence[float]) -> tuple[float, ...]:
    """`p` as served: each probability a whole number of millionths, the numbers summing to exactly one million
    (largest remainders round up, ties to the first option), so the values sum to one as written and a score
    computed from them is exact. A strict reader checks both: pydantic-ai's Decisions client refused about half of
    all score answers whose unrounded float64 values summed to one only within rounding. A millionth changes no
    answer's meaning (an option under half a millionth is served as 0)."""
    total = math.fsum(p)
    exact = [x / total * _UNIT for x in p]
    whole = [math.floor(e) for e in exact]
    short = _UNIT - sum(whole)
    for i in sorted(range(len(p)), key=lambda i: (whole[i] - exact[i], i))[:short]:
        whole[i] += 1
    return tuple(k / _UNIT for k in whole)


def probabilities_compute(*, logprobs: Sequence[float], temperature: float) -> list[float]:
    """Stable softmax of logprobs/temperature; -inf is allowed (probability 0), NaN is not."""
    for x in logprobs:
        if x != x or x == math.inf:  # NaN is the one float unequal to itself
            raise BackendFailed("the backend returned a NaN or +inf log-prob")
    scaled = logprobs if temperature == 1.0 else [x / temperature for x in logprobs]  # x / 1.0 is x, exactly
    top = max(scaled)
    if top == -math.inf:
        raise BackendFailed("the backend gave every label a log-prob of -inf")
    weights = [math.exp(x - top) for x in scaled]
    total = math.fsum(weights)
    return [w / total for w in weights]


def debiased_logprobs(*, logprobs: Sequence[float], prior_logprobs: Sequence[float]) -> list[float]:
    """Label log-probs with the prior's renormalised log-probs subtracted (dividing out the bias).

    A label the prior gives no probability at all is left as it is rather than made infinite: there
    is no measured bias to divide out.
    """
    prior = probabilities_compute(logprobs=prior_logprobs, temperature=1.0)
    return [x - math.log(p) if p > 0 else x for x, p in zip(logprobs, prior, strict=True)]


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


_IDENTITY = tuple(tuple(range(n)) for n in range(257))
"""The order sent, by option count (every question in one order is asked in it)."""


def _unpermuted(p: list[float], order: Sequence[int]) -> list[float]:
    """Label-position probabilities back in the question's option order (`p` itself when that is the order)."""
    if len(order) < len(_IDENTITY) and order == _IDENTITY[len(order)]:
        return p
    out = [0.0] * len(order)
    for position, option in enumerate(order):
        out[option] = p[position]
    return out


def _mean(rows: Sequence[Sequence[float]]) -> tuple[float, ...]:
    if len(rows) == 1:  # one option order (the default): the mean is the row itself
        return tuple(rows[0])
    return tuple(math.fsum(column) / len(rows) for column in zip(*rows, strict=True))


def answer_compute(
    *, question: Question, branches: Sequence[BranchScore], temperature: float, confidence: ConfidenceFormula
) -> Answer:
    """One question's answer from its branches (one per option order)."""
    served, raw = [], []
    for branch in branches:
        logprobs = (
            branch.label_logprobs
            if branch.prior_logprobs is None
            else debiased_logprobs(logprobs=branch.label_logprobs, prior_logprobs=branch.prior_logprobs)
        )
        served.append(_unpermuted(probabilities_compute(logprobs=logprobs, temperature=temperature), branch.order))
        unchanged = branch.prior_logprobs is None and temperature == 1.0  # served as the model gave them
        raw.append(
            served[-1]
            if unchanged
            else _unpermuted(probabilities_compute(logprobs=branch.label_logprobs, temperature=1.0), branch.order)
        )
    p = probabilities_served(_mean(served))
    masses = [math.fsum(map(math.exp, b.label_logprobs)) for b in branches]
    mass = masses[0] if len(masses) == 1 else math.fsum(masses) / len(masses)  # the same float for one order
    return Answer(
        question=question,
        probabilities=p,
        raw_probabilities=_mean(raw),
        label_mass=min(1.0, mass),
        confidence=confidence_of(question=question, p=p, formula=confidence),
        branches=tuple(branches),
    )


def confidence_of(*, question: Question, p: Sequence[float], formula: ConfidenceFormula) -> float | None:
    """How peaked `p` is for a choice or a score; a noul answer has no confidence."""
    if question.type == "choice":
        return choice_confidence(p=p, formula=formula)
    if question.type == "score":
        return score_confidence(p=p, formula=formula)
    return None

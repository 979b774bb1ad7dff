"""How good probabilistic answers are against true labels: accuracy, log loss, Brier, ECE, confusion.

Shared by the quality bench, dataset runs and calibration fitting, so every figure the project
prints means the same thing. Each item is the served distribution over a question's options and the
index of the true option.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from inference.scoring import label_argmax

ECE_BINS = 10
LOG_FLOOR = 1e-12
"""Probabilities are floored here for the log loss, so one confident miss costs a lot but finitely."""


@dataclass(frozen=True)
class Scored:
    probabilities: Sequence[float]
    label: int


@dataclass(frozen=True)
class Metrics:
    n: int
    accuracy: float
    log_loss: float
    brier: float
    """Multi-class Brier score: mean over items of Σ_k (p_k − y_k)²; 0 is perfect, 2 the worst."""
    ece: float
    """Expected calibration error over 10 equal-width bins of the top probability."""


def metrics_compute(*, items: Sequence[Scored]) -> Metrics:
    if not items:
        return Metrics(n=0, accuracy=math.nan, log_loss=math.nan, brier=math.nan, ece=math.nan)
    n = len(items)
    hits = [label_argmax(item.probabilities) == item.label for item in items]
    log_loss = -math.fsum(math.log(max(item.probabilities[item.label], LOG_FLOOR)) for item in items) / n
    brier = (
        math.fsum(
            math.fsum((p - (1.0 if k == item.label else 0.0)) ** 2 for k, p in enumerate(item.probabilities))
            for item in items
        )
        / n
    )
    return Metrics(
        n=n,
        accuracy=sum(hits) / n,
        log_loss=log_loss,
        brier=brier,
        ece=expected_calibration_error(confidences=[max(i.probabilities) for i in items], hits=hits),
    )


def expected_calibration_error(*, confidences: Sequence[float], hits: Sequence[bool], bins: int = ECE_BINS) -> float:
    """Σ over bins of (share of items in the bin) × |accuracy − mean confidence| in the bin."""
    totals = [[0, 0.0, 0] for _ in range(bins)]  # items, summed confidence, hits
    for confidence, hit in zip(confidences, hits, strict=True):
        b = min(bins - 1, int(confidence * bins))
        totals[b][0] += 1
        totals[b][1] += confidence
        totals[b][2] += hit
    n = len(confidences)
    return math.fsum(abs(h / c - s / c) * c / n for c, s, h in totals if c)


def ece_if_calibrated(*, confidences: Sequence[float], replicates: int = 400, seed: int = 0) -> tuple[float, float]:
    """(mean, 95th percentile) of the ECE that answers exactly this confident would show if each were
    right with the probability it states, drawn `replicates` times: the ECE that sampling noise alone
    gives at this many items. A measured ECE under that 95th percentile cannot be told apart from
    perfect calibration on so few items: for confidences spread over 0.5-1 the mean is about 0.09 at
    65 items and 0.05 at 200 (10 bins)."""
    if not confidences:
        return math.nan, math.nan
    rng = random.Random(seed)
    draws = sorted(
        expected_calibration_error(confidences=confidences, hits=[rng.random() < c for c in confidences])
        for _ in range(replicates)
    )
    return math.fsum(draws) / replicates, draws[min(replicates - 1, int(0.95 * replicates))]


def reliability_bins(*, items: Sequence[Scored], bins: int = ECE_BINS) -> list[tuple[float, float, int]]:
    """(mean confidence, accuracy, items) per non-empty bin: the points of a reliability diagram."""
    grouped: list[list[tuple[float, bool]]] = [[] for _ in range(bins)]
    for item in items:
        confidence = max(item.probabilities)
        hit = label_argmax(item.probabilities) == item.label
        grouped[min(bins - 1, int(confidence * bins))].append((confidence, hit))
    return [(math.fsum(c for c, _ in g) / len(g), sum(h for _, h in g) / len(g), len(g)) for g in grouped if g]


def confusion_matrix(*, items: Sequence[Scored], options: int) -> list[list[int]]:
    """rows: the true option; columns: the chosen one."""
    matrix = [[0] * options for _ in range(options)]
    for item in items:
        matrix[item.label][label_argmax(item.probabilities)] += 1
    return matrix

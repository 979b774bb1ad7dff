"""The ECE that sampling noise alone gives: what a bench task's measured ECE is judged against."""

from __future__ import annotations

import random

import pytest

from inference.metrics import ece_if_calibrated, expected_calibration_error


def _confidences(*, n: int, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [0.5 + 0.5 * rng.random() for _ in range(n)]


def test_answers_that_are_always_right_when_sure_have_no_sampling_noise() -> None:
    assert ece_if_calibrated(confidences=[1.0] * 40) == (0.0, 0.0)


def test_the_noise_floor_of_perfect_calibration_shrinks_with_more_items() -> None:
    small, small_p95 = ece_if_calibrated(confidences=_confidences(n=65))
    large, large_p95 = ece_if_calibrated(confidences=_confidences(n=520))
    assert 0.06 < small < 0.12  # a perfectly calibrated model on 65 items: ECE 0.05 is out of reach
    assert large < small / 2 and large_p95 < small_p95
    assert small < small_p95


def test_the_floor_is_the_ece_of_answers_drawn_right_with_the_probability_they_state() -> None:
    confidences = _confidences(n=200)
    rng = random.Random(7)
    drawn = [
        expected_calibration_error(confidences=confidences, hits=[rng.random() < c for c in confidences])
        for _ in range(400)
    ]
    mean, p95 = ece_if_calibrated(confidences=confidences, seed=3)
    assert mean == pytest.approx(sum(drawn) / len(drawn), rel=0.1)
    assert sum(d <= p95 for d in drawn) / len(drawn) == pytest.approx(0.95, abs=0.03)


def test_an_overconfident_model_stands_above_the_floor() -> None:
    confidences = _confidences(n=300)
    rng = random.Random(2)
    hits = [rng.random() < c - 0.2 for c in confidences]  # 20 points less often right than it says
    assert (
        expected_calibration_error(confidences=confidences, hits=hits) > ece_if_calibrated(confidences=confidences)[1]
    )

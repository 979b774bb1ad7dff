"""Calibration math: applying, fitting and reporting a temperature and per-option biases."""

from __future__ import annotations

import math
import random

from inference.metrics import Scored
from inference.questions import Option, Question
from inference.vector_scaling import (
    Calibrator,
    calibration_fit,
    calibrator_fit,
    probabilities_calibrate,
    question_key,
    split_held_out,
)


def _softmax(logits: list[float]) -> list[float]:
    top = max(logits)
    w = [math.exp(x - top) for x in logits]
    return [x / sum(w) for x in w]


def _overconfident(*, n: int, sharpen: float, bias: tuple[float, ...] = (0.0, 0.0, 0.0), seed: int = 1) -> list[Scored]:
    """Labels drawn from true probabilities; the served ones are those sharpened by `sharpen`, then biased."""
    rng = random.Random(seed)
    items = []
    for _ in range(n):
        logits = [rng.gauss(0, 1.0) for _ in range(3)]
        truth = _softmax(logits)
        label = rng.choices(range(3), weights=truth)[0]
        served = _softmax([sharpen * x + b for x, b in zip(logits, bias, strict=True)])
        items.append(Scored(probabilities=served, label=label))
    return items


def test_temperature_one_and_no_biases_leaves_probabilities_unchanged() -> None:
    p = probabilities_calibrate(probabilities=[0.7, 0.2, 0.1], calibrator=Calibrator(temperature=1.0))
    assert [round(x, 12) for x in p] == [0.7, 0.2, 0.1]


def test_temperature_above_one_flattens_and_keeps_the_winner() -> None:
    p = probabilities_calibrate(probabilities=[0.9, 0.1], calibrator=Calibrator(temperature=2.0))
    assert math.isclose(p[0], 3 / 4)  # sqrt(0.9) / (sqrt(0.9) + sqrt(0.1)) = 3/4


def test_biases_shift_probability_towards_an_option() -> None:
    lean = Calibrator(temperature=1.0, biases=(0.0, math.log(3)))
    p = probabilities_calibrate(probabilities=[0.5, 0.5], calibrator=lean)
    assert math.isclose(p[1], 0.75)


def test_temperature_fit_recovers_the_sharpening_of_overconfident_answers() -> None:
    calibrator = calibrator_fit(items=_overconfident(n=3000, sharpen=3.0), vector=False)
    assert calibrator.biases is None
    assert 2.6 < calibrator.temperature < 3.4


def test_vector_fit_recovers_a_lean_towards_one_option() -> None:
    calibrator = calibrator_fit(items=_overconfident(n=3000, sharpen=1.0, bias=(0.0, 0.0, 1.5)), vector=True)
    assert calibrator.biases is not None
    assert 0.8 < calibrator.temperature < 1.25
    lean = calibrator.biases[2] - (calibrator.biases[0] + calibrator.biases[1]) / 2
    assert -1.8 < lean < -1.2


def test_held_out_split_is_seeded_disjoint_and_thirty_percent() -> None:
    fit, held = split_held_out(count=100)
    assert (fit, held) == split_held_out(count=100)
    assert len(held) == 30 and not set(fit) & set(held) and len(fit) + len(held) == 100


def test_fit_report_shows_held_out_log_loss_and_ece_improving() -> None:
    calibrator, report = calibration_fit(items=_overconfident(n=400, sharpen=4.0), vector=True)
    assert (report.n, report.n_fit, report.n_held_out) == (400, 280, 120)
    assert report.after.log_loss < report.before.log_loss
    assert report.after.ece < report.before.ece
    assert calibrator.temperature > 2
    assert sum(c for _, _, c in report.reliability_before) == 120


def test_question_key_depends_on_wording_and_options_not_on_the_id() -> None:
    def key(qid: str, instructions: str, keys: tuple[str, ...]) -> str:
        options = tuple(Option(k, k) for k in keys)
        return question_key(question=Question(id=qid, type="choice", instructions=instructions, options=options))

    assert key("a", "Mood?", ("x", "y")) == key("b", "Mood?", ("x", "y"))
    assert key("a", "Mood?", ("x", "y")) != key("a", "Mood?", ("y", "x"))
    assert key("a", "Mood?", ("x", "y")) != key("a", "Tone?", ("x", "y"))

import math

import pytest

from api.systemone.render import answer_render
from inference.errors import BackendFailed
from inference.questions import Question, question_build
from inference.scoring import (
    Answer,
    BranchScore,
    answer_compute,
    choice_confidence,
    probabilities_compute,
    score_confidence,
)


def answer_of(question: Question, logprobs: list[float], temperature: float = 1.0) -> Answer:
    order = tuple(range(len(question.options)))
    return answer_compute(
        question=question,
        branches=[BranchScore(order=order, label_logprobs=tuple(logprobs))],
        temperature=temperature,
        confidence="entropy",
    )


def test_probabilities_sum_to_one_and_survive_extreme_logprobs():
    p = probabilities_compute(logprobs=[-9999.0, -1e30, -0.1, -float("inf")], temperature=1.0)
    assert math.isclose(sum(p), 1.0)
    assert p[2] == pytest.approx(1.0)
    assert p[3] == 0.0
    assert all(math.isfinite(x) for x in p)


def test_temperature_divides_logprobs_before_softmax():
    hot = probabilities_compute(logprobs=[0.0, -1.0], temperature=2.0)
    assert hot[0] == pytest.approx(1 / (1 + math.exp(-0.5)))


def test_nan_or_all_negative_infinity_is_a_backend_failure():
    with pytest.raises(BackendFailed):
        probabilities_compute(logprobs=[float("nan"), 0.0], temperature=1.0)
    with pytest.raises(BackendFailed):
        probabilities_compute(logprobs=[-float("inf")] * 2, temperature=1.0)


def test_choice_argmax_ties_go_to_the_first_option():
    q = question_build(id="q", type="choice", instructions=None, criteria={"b": None, "a": None, "c": None})
    body = answer_render(answer=answer_of(q, [-1.0, -1.0, -3.0]))
    assert body["choice"] == "b"
    assert list(body["probabilities"]) == ["b", "a", "c"]


def test_entropy_confidence_is_zero_for_uniform_and_one_for_certain():
    assert choice_confidence(p=[0.25] * 4, formula="entropy") == pytest.approx(0.0)
    assert choice_confidence(p=[1.0, 0.0, 0.0], formula="entropy") == pytest.approx(1.0)


def test_typesafe_choice_confidence_formula():
    assert choice_confidence(p=[0.5, 0.25, 0.25], formula="typesafe") == pytest.approx((3 * 0.5 - 1) / 2)


def test_typesafe_score_confidence_uses_distance_from_the_mode():
    p = [0.1, 0.7, 0.2]
    uniform = (1 + 0 + 1) / 3  # a uniform distribution's mean distance from the middle level
    assert score_confidence(p=p, formula="typesafe") == pytest.approx(1 - (0.1 + 0.2) / uniform)


def test_score_answer_has_expectation_legend_as_sent_and_string_keys():
    levels = ["Calm", {"label": "Angry", "hint": "shouting"}]
    q = question_build(id="s", type="score", instructions="How?", criteria=levels)
    body = answer_render(answer=answer_of(q, [math.log(0.25), math.log(0.75)]))
    assert body["score"] == pytest.approx(0.75)
    assert body["legend"] == {"0": "Calm", "1": {"label": "Angry", "hint": "shouting"}}
    assert body["probabilities"] == pytest.approx({"0": 0.25, "1": 0.75})
    assert 0.0 <= body["confidence"] <= 1.0


def test_noul_answer_is_probability_of_true():
    q = question_build(id="n", type="noul", instructions="Refund?", criteria=None)
    assert answer_render(answer=answer_of(q, [math.log(0.8), math.log(0.2)])) == {
        "type": "noul",
        "noul": pytest.approx(0.8),
    }


def test_typesafe_score_confidence_normalises_by_the_uniform_spread_around_the_middle():
    p = [0.6, 0.3, 0.1, 0.0]
    uniform = (1.5 + 0.5 + 0.5 + 1.5) / 4
    assert score_confidence(p=p, formula="typesafe") == pytest.approx(1 - (0.3 * 1 + 0.1 * 2) / uniform)


def test_label_mass_is_the_labels_share_of_the_whole_vocabulary_before_renormalising():
    q = question_build(id="n", type="noul", instructions="Refund?", criteria=None)
    answer = answer_of(q, [math.log(0.006), math.log(0.002)])
    assert answer.label_mass == pytest.approx(0.008)
    assert answer.probabilities == pytest.approx((0.75, 0.25))


def test_debiasing_divides_out_the_content_free_prior():
    q = question_build(id="q", type="choice", instructions=None, criteria={"a": None, "b": None, "c": None})
    # The model prefers the first label 4:1:1 whatever the text; on this text it says 0.5/0.25/0.25.
    branch = BranchScore(
        order=(0, 1, 2),
        label_logprobs=(math.log(0.5), math.log(0.25), math.log(0.25)),
        prior_logprobs=(math.log(0.4), math.log(0.1), math.log(0.1)),
    )
    answer = answer_compute(question=q, branches=[branch], temperature=1.0, confidence="entropy")
    assert answer.probabilities == pytest.approx((0.5 / 0.4 / 6.25, 0.25 / 0.1 / 6.25, 0.25 / 0.1 / 6.25))
    assert answer.raw_probabilities == pytest.approx((0.5, 0.25, 0.25))


def test_option_orders_are_mapped_back_and_averaged():
    q = question_build(id="q", type="choice", instructions=None, criteria={"a": None, "b": None})
    sent = BranchScore(order=(0, 1), label_logprobs=(math.log(0.9), math.log(0.1)))  # label A = a
    swapped = BranchScore(order=(1, 0), label_logprobs=(math.log(0.5), math.log(0.5)))  # label A = b
    answer = answer_compute(question=q, branches=[sent, swapped], temperature=1.0, confidence="entropy")
    assert answer.probabilities == pytest.approx((0.7, 0.3))
    assert answer.label_mass == pytest.approx(1.0)

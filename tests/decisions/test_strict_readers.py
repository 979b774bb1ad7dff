"""Answers a strict reader accepts to the last digit: probabilities in whole millionths that sum to exactly one, and
a score computed from exactly those. pydantic-ai 2.68's Decisions client checks that a score and its probabilities
can fit each other with no float tolerance; unrounded float64 values failed it on about half of all score answers.
Its own clients run against a running server here, on both routes."""

from __future__ import annotations

import random
from decimal import Decimal

import pytest
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.models.decision import DecisionRequest, ScoreQuestion
from pydantic_ai.models.openai_decisions import OpenAIDecisionsModel
from pydantic_ai.models.system_one import SystemOneModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.providers.system_one import SystemOneProvider

from inference.scoring import PROBABILITY_DECIMALS, probabilities_served


def test_served_probabilities_are_whole_millionths_that_sum_to_exactly_one():
    rng = random.Random(7)
    for _ in range(2_000):
        p = [rng.random() ** rng.choice([1, 3, 12]) for _ in range(rng.randint(2, 12))]
        served = probabilities_served(p)
        decimals = [Decimal(repr(x)) for x in served]
        assert sum(decimals) == 1
        assert all(int(d.as_tuple().exponent) >= -PROBABILITY_DECIMALS for d in decimals)
        assert all(abs(x - y / sum(p)) <= 10**-PROBABILITY_DECIMALS for x, y in zip(served, p, strict=True))


def test_ties_of_the_remainder_go_to_the_first_option():
    assert probabilities_served([1, 1, 1]) == (0.333334, 0.333333, 0.333333)


def score_questions() -> dict[str, ScoreQuestion]:
    """30 distinct score questions: 2 to 10 levels, each with its own instructions."""
    return {
        f"rate{i}": ScoreQuestion(
            instructions=f"How severe is problem number {i} in this ticket?",
            criteria=[f"level {j} of {i}" for j in range(2 + i % 9)],
        )
        for i in range(30)
    }


@pytest.mark.parametrize("route", ["openai-decisions", "system-one"])
async def test_pydantic_ais_strict_client_accepts_every_score_answer(asgi_server, route):
    if route == "openai-decisions":
        model: OpenAIDecisionsModel | SystemOneModel = OpenAIDecisionsModel(
            "jev-latest", provider=OpenAIProvider(base_url=asgi_server.url + "/v1", api_key="unused")
        )
    else:
        model = SystemOneModel("jev-latest", provider=SystemOneProvider(base_url=asgi_server.url, api_key="unused"))
    questions = score_questions()
    refused = []
    for name, question in questions.items():  # one request each: a refused answer fails only its own question
        request = DecisionRequest(state="My parcel is three weeks late and nobody answers.", questions={name: question})
        try:
            response = await model.decide(request, {})
        except UnexpectedModelBehavior as exc:
            refused.append(f"{name}: {str(exc)[:300]}")
            continue
        assert name in response.answers
    assert not refused, f"{len(refused)} of {len(questions)} refused: {refused[:3]}"

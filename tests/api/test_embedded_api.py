"""The System One API end to end on the embedded engine: the real bundled Qwen2.5-Coder-0.5B (the small
model, fast enough for plumbing) behind the real ASGI app (body reader, lean handler, views, runner,
scoring, debiasing)."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from inference.backends.llamacpp import LlamaCppBackend
from tests.conftest import README_REQUEST
from tests.embedded import SMALL, api_on, bundled_backend

pytestmark = pytest.mark.embedded


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaCppBackend]:
    with bundled_backend(source=SMALL, n_ctx=8192, threads=1) as backend:
        yield backend


@pytest.fixture
async def embedded(llama: LlamaCppBackend) -> AsyncIterator[httpx.AsyncClient]:
    async with api_on(backend=llama) as client:
        yield client


async def test_readme_request_is_answered_with_every_branch_reusing_the_prefix(embedded):
    first = await embedded.post("/v1/systemone", json=README_REQUEST)  # measures the questions' priors
    response = await embedded.post("/v1/systemone", json=README_REQUEST)
    assert response.status_code == 200, response.text
    assert first.json()["usage"]["input_tokens"] > body_tokens(response)  # the priors are cached now
    assert first.json()["answers"] == response.json()["answers"]
    body = response.json()
    assert [a["type"] for a in body["answers"].values()] == ["noul", "choice", "score"]
    for answer in body["answers"].values():
        if answer["type"] != "noul":
            assert math.isclose(sum(answer["probabilities"].values()), 1.0, abs_tol=1e-9)
    assert body["usage"]["output_tokens"] == 4
    prefix = int(response.headers["x-openjev-prefix-tokens"])
    assert prefix > 20
    assert int(response.headers["x-openjev-cached-tokens"]) == 3 * prefix
    assert response.headers["x-openjev-model"].startswith("Qwen/Qwen2.5-Coder-0.5B-Instruct")
    assert float(response.headers["x-openjev-label-mass"]) >= 0.9


def body_tokens(response: httpx.Response) -> int:
    return int(response.json()["usage"]["input_tokens"])


@pytest.mark.parametrize(
    ("review", "positive"),
    [
        ("Absolutely love it, works perfectly, five stars. Would buy again!", True),
        ("Broke after two days, support ignored me. Terrible, avoid it.", False),
    ],
)
async def test_clearly_worded_yes_no_lands_on_the_right_side(embedded, review, positive):
    """The small model, debiased as `auto` serves it; the default model's answers are tested in
    test_embedded_answers.py."""
    body = {
        "model": "jev-latest",
        "state": f"Review: {review}",
        "questions": {"q": {"type": "noul", "instructions": "Is this review positive?"}},
    }
    response = await embedded.post("/v1/systemone", json=body)
    assert (response.json()["answers"]["q"]["noul"] > 0.5) is positive


async def test_an_answer_does_not_change_when_questions_are_added_or_reordered(embedded):
    alone = {**README_REQUEST, "questions": {"team": README_REQUEST["questions"]["team"]}}
    mixed = {
        **README_REQUEST,
        "questions": {
            "urgent": {"type": "noul", "instructions": "Is it urgent?"},
            **dict(reversed(README_REQUEST["questions"].items())),
        },
    }
    first = (await embedded.post("/v1/systemone", json=alone)).json()["answers"]["team"]["probabilities"]
    second = (await embedded.post("/v1/systemone", json=mixed)).json()["answers"]["team"]["probabilities"]
    assert first.keys() == second.keys()
    assert all(abs(first[k] - second[k]) <= 1e-6 for k in first)

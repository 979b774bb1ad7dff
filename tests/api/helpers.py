"""Helpers of the API tests: requests and answers in the wire shapes, and predicting the fake backend's
answers by compiling the same plan the server compiles."""

from __future__ import annotations

import math
from typing import Any

import httpx

from api.checking.limits import Limits
from api.systemone.parsing import systemone_request_parse
from fake_sglang import FakeSGLang
from inference.prompts import Budget, Plan, plan_compile
from inference.scoring import probabilities_compute, probabilities_served
from testbed.qwen3 import qwen3_labels, qwen3_tokenizer
from tests.conftest import README_REQUEST


def plan_for(body: dict[str, Any]) -> Plan:
    parsed = systemone_request_parse(data=body, limits=Limits(64, 255), models=frozenset({"jev-latest"}))
    return plan_compile(
        conversation=parsed.evaluation.conversation,
        questions=parsed.evaluation.questions,
        tokenizer=qwen3_tokenizer(),
        labels=qwen3_labels(),
        budget=Budget(32768, 262144),
    )


def expected_probabilities(fake: FakeSGLang, body: dict[str, Any]) -> dict[str, list[float]]:
    plan = plan_for(body)
    out = {}
    for branch in plan.branches:
        ids = plan.branch_ids(branch)
        logprobs = [fake.predict_logprob(ids, t) for t in branch.label_ids]
        out[branch.question.id] = list(probabilities_served(probabilities_compute(logprobs=logprobs, temperature=1.0)))
    return out


def answer_vector(answer: dict[str, Any]) -> list[float]:
    if answer["type"] == "noul":
        return [answer["noul"]]
    return list(answer["probabilities"].values())


def close(a: list[float], b: list[float], tol: float = 1e-9) -> bool:
    return len(a) == len(b) and all(math.isclose(x, y, abs_tol=tol) for x, y in zip(a, b, strict=True))


def assert_answers_expected(answers: dict[str, Any], expected: dict[str, list[float]]) -> None:
    """Every question answered, in order, with the whole distribution predicted (a noul's P(true) alone)."""
    assert list(answers) == list(expected)
    for qid, answer in answers.items():
        want = expected[qid][:1] if answer["type"] == "noul" else expected[qid]
        assert len(want) >= 1 and close(answer_vector(answer), want), qid


NOUL = {"type": "noul", "instructions": "Refund?"}


def body_with(**changes: Any) -> dict[str, Any]:
    """The README request with some fields replaced."""
    return {**README_REQUEST, **changes}


def assert_validation(response: httpx.Response, loc_prefix: list[str | int]) -> None:
    """A 422 in FastAPI's shape, every location under `body`, one of them under `loc_prefix`."""
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, list) and detail
    assert all(set(d) == {"loc", "msg", "type"} and d["loc"][0] == "body" for d in detail)
    assert any(d["loc"][: len(loc_prefix)] == loc_prefix for d in detail), detail


def assert_error(response: httpx.Response, status: int, error_type: str) -> None:
    """A non-422 error in the `{"detail": {"error_type", "message"}}` shape."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    detail = response.json()["detail"]
    assert detail["error_type"] == error_type and isinstance(detail["message"], str)

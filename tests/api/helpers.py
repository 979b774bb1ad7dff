"""Predicting the fake backend's answers: compile the same plan the server compiles."""

from __future__ import annotations

import math
from typing import Any

from evaluations.parsing import Limits, systemone_request_parse
from fake_sglang import FakeSGLang
from inference.prompts import Budget, Plan, plan_compile
from inference.scoring import probabilities_compute
from testbed.qwen3 import qwen3_labels, qwen3_tokenizer


def plan_for(body: dict[str, Any]) -> Plan:
    parsed = systemone_request_parse(data=body, limits=Limits(64, 255), models=frozenset({"jev-latest"}))
    return plan_compile(conversation=parsed.evaluation.conversation, questions=parsed.evaluation.questions,
                        tokenizer=qwen3_tokenizer(),
                        labels=qwen3_labels(), budget=Budget(32768, 262144))


def expected_probabilities(fake: FakeSGLang, body: dict[str, Any]) -> dict[str, list[float]]:
    plan = plan_for(body)
    out = {}
    for branch in plan.branches:
        ids = plan.branch_ids(branch)
        logprobs = [fake.predict_logprob(ids, t) for t in branch.label_ids]
        out[branch.question.id] = probabilities_compute(logprobs=logprobs, temperature=1.0)
    return out


def answer_vector(answer: dict[str, Any]) -> list[float]:
    if answer["type"] == "noul":
        return [answer["noul"]]
    return list(answer["probabilities"].values())


def close(a: list[float], b: list[float], tol: float = 1e-9) -> bool:
    return len(a) == len(b) and all(math.isclose(x, y, abs_tol=tol) for x, y in zip(a, b, strict=True))

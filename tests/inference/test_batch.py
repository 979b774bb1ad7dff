"""Several evaluations run as one (`inference.batch`) against the fake SGLang: one admission, every
budget problem before any backend call, the first failure cancelling and aborting the rest."""

from __future__ import annotations

import asyncio

import pytest

from inference.backends.sglang import SGLangBackend
from inference.batch import evaluations_run, outcomes_merge
from inference.errors import BackendFailed, Overloaded, RequestInvalid
from inference.prompts import Budget
from inference.questions import question_build
from inference.requests import EvaluationRequest, conversation_of_text
from inference.runner import AdmissionGate, Evaluator, Outcome, Timings, Usage, plan_of
from inference.scoring import Scoring
from inference.tuning import tuning_uniform
from testbed.qwen3 import qwen3_labels, qwen3_tokenizer

SCORING = Scoring(confidence="entropy", tuning=tuning_uniform(temperature=1.0, debias=False))
QUESTION = question_build(id="refund", type="noul", instructions="Does the customer want a refund?", criteria=None)


def evaluator_for(fake, *, gate: AdmissionGate | None = None, budget: Budget | None = None) -> Evaluator:
    backend = SGLangBackend(url=fake.url, model="m", tokenizer=qwen3_tokenizer())
    return Evaluator(
        backend=backend,
        labels=qwen3_labels(),
        budget=budget or Budget(32768, 262144),
        scoring=SCORING,
        gate=gate or AdmissionGate(4),
        timeout=30,
    )


def requests_of(*texts: str) -> list[EvaluationRequest]:
    return [EvaluationRequest(conversation=conversation_of_text(text=t), questions=(QUESTION,)) for t in texts]


async def test_every_request_is_answered_in_order_under_one_admission(fake):
    gate = AdmissionGate(1)
    outcomes = await evaluations_run(evaluator=evaluator_for(fake, gate=gate), requests=requests_of("a", "b", "c"))
    assert len(outcomes) == 3 and all(len(o.answers) == 1 for o in outcomes)
    assert gate.active == 0  # three evaluations through a gate of one: one slot for the batch


async def test_a_full_gate_refuses_the_whole_batch_before_any_backend_call(fake):
    gate = AdmissionGate(1)
    with gate.admit(), pytest.raises(Overloaded):
        await evaluations_run(evaluator=evaluator_for(fake, gate=gate), requests=requests_of("a", "b"))
    assert fake.requests == []


async def test_budget_problems_of_every_request_and_the_total_are_raised_before_any_backend_call(fake):
    short = plan_of(evaluator=evaluator_for(fake), request=requests_of("short")[0]).input_tokens
    small = evaluator_for(fake, budget=Budget(short + 20, 262144))
    with pytest.raises(RequestInvalid) as too_long:
        await evaluations_run(evaluator=small, requests=requests_of("short", "long " * 100, "longer " * 200))
    assert sorted({p.loc[:2] for p in too_long.value.problems}) == [("requests", 1), ("requests", 2)]

    total = evaluator_for(fake, budget=Budget(32768, 2 * short))
    with pytest.raises(RequestInvalid) as over:
        await evaluations_run(evaluator=total, requests=requests_of("one", "two", "three"))
    assert [p.loc for p in over.value.problems] == [("requests",)]
    assert "over all inputs" in over.value.problems[0].msg
    assert fake.requests == []


async def test_the_first_failure_is_raised_as_itself_and_cancels_the_others(fake):
    fake.delay = 5
    fake.fail_after = 1  # the first warm-up waits (delayed), every later call fails at once
    with pytest.raises(BackendFailed):
        await evaluations_run(evaluator=evaluator_for(fake), requests=requests_of("a", "b", "c"))
    await asyncio.to_thread(fake.wait_idle, 2)  # long before the 5 s delay: the waiting call was cut
    assert fake.disconnected == [fake.requests[0]["body"]["rid"]]


def test_merged_outcomes_sum_tokens_and_take_the_slowest_times():
    def outcome(tokens: int, prefill: float, cached: int | None) -> Outcome:
        return Outcome(
            answers=(),
            usage=Usage(input_tokens=tokens, output_tokens=2),
            prefix_tokens=tokens - 1,
            cached_tokens=cached,
            timings=Timings(prepare_ms=1.0, prefill_ms=prefill, branches_ms=prefill),
            generations=2,
        )

    merged = outcomes_merge(outcomes=[outcome(10, 5.0, 3), outcome(20, 9.0, 4)])
    assert (merged.usage.input_tokens, merged.usage.output_tokens, merged.prefix_tokens) == (30, 4, 28)
    assert (merged.timings.prepare_ms, merged.timings.prefill_ms, merged.cached_tokens) == (2.0, 9.0, 7)
    assert outcomes_merge(outcomes=[outcome(10, 5.0, 3), outcome(20, 9.0, None)]).cached_tokens is None

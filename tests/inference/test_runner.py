"""The runner against the fake SGLang: cancellation, aborts and the process-wide branch limit."""

from __future__ import annotations

import asyncio

import pytest

from inference.backends.sglang import SGLangBackend
from inference.debias import Priors
from inference.errors import BackendFailed, Overloaded
from inference.prompt_text import content_free_prefix
from inference.prompts import Budget, plan_compile
from inference.questions import question_build
from inference.requests import conversation_of_text
from inference.runner import AdmissionGate, plan_run
from inference.scoring import Scoring, answer_compute
from inference.tuning import tuning_uniform
from testbed.qwen3 import qwen3_labels, qwen3_tokenizer

# Debiased wherever a test gives priors.
SCORING = Scoring(confidence="entropy", tuning=tuning_uniform(temperature=1.0, debias=True))


def plan_of(n: int):
    questions = [question_build(id=str(i), type="noul", instructions=f"Question {i}?", criteria=None) for i in range(n)]
    return plan_compile(
        conversation=conversation_of_text(text="A ticket."),
        questions=questions,
        tokenizer=qwen3_tokenizer(),
        labels=qwen3_labels(),
        budget=Budget(32768, 262144),
    )


def backend_for(fake, **kw):
    return SGLangBackend(url=fake.url, model="m", tokenizer=qwen3_tokenizer(), **kw)


async def test_client_disconnect_cancels_the_evaluation_and_the_worker_aborts_it(fake, branch_mode):
    fake.delay = 5
    backend = backend_for(fake, branch_mode=branch_mode)
    task = asyncio.create_task(plan_run(plan=plan_of(3), backend=backend, scoring=SCORING, timeout=30))
    await asyncio.to_thread(fake.wait_in_flight, 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.to_thread(fake.wait_idle, 2)  # long before the 5 s delay
    assert fake.disconnected == [fake.requests[0]["body"]["rid"]]  # the warm-up; no branch was sent
    assert len(fake.requests) == 1 and fake.aborted == []  # closing the connection is the abort


async def test_process_wide_branch_limit_caps_in_flight_backend_calls(fake):
    fake.delay = 0.05
    backend = backend_for(fake, branch_mode="parallel", max_in_flight=4)
    outcomes = await asyncio.gather(
        *(plan_run(plan=plan_of(6), backend=backend, scoring=SCORING, timeout=30) for _ in range(3))
    )
    assert all(len(o.answers) == 6 for o in outcomes)
    assert fake.max_in_flight == 4


async def test_clamped_very_negative_logprobs_are_accepted(fake):
    plan = plan_of(1)
    fake.clamp_token_ids = {plan.branches[0].label_ids[1]}
    outcome = await plan_run(plan=plan, backend=backend_for(fake), scoring=SCORING, timeout=30)
    assert outcome.answers[0].probabilities[0] == pytest.approx(1.0)


async def test_result_without_meta_info_is_a_backend_failure(fake):
    fake.malformed = "missing_meta"
    with pytest.raises(BackendFailed):
        await plan_run(plan=plan_of(2), backend=backend_for(fake), scoring=SCORING, timeout=30)


def test_admission_gate_refuses_past_its_limit_and_frees_on_exit():
    gate = AdmissionGate(1)
    with gate.admit(), pytest.raises(Overloaded), gate.admit():
        pass
    with gate.admit():
        assert gate.active == 1
    assert gate.active == 0


async def test_debiasing_measures_each_new_question_once_in_the_same_batch(fake):
    plan = plan_of(2)
    priors = Priors(prefix_ids=content_free_prefix(tokenizer=qwen3_tokenizer()))
    backend = backend_for(fake)
    first = await plan_run(plan=plan, backend=backend, scoring=SCORING, timeout=30, priors=priors)
    assert len(fake.requests) == 2  # the warm-up, then one batch: two branches and their two priors
    assert len(fake.requests[1]["body"]["input_ids"]) == 4
    assert first.usage.output_tokens == 3
    fake.reset(controls=False, cache=False)
    second = await plan_run(plan=plan, backend=backend, scoring=SCORING, timeout=30, priors=priors)
    assert len(fake.requests[1]["body"]["input_ids"]) == 2  # the priors are cached now
    assert [a.probabilities for a in first.answers] == [a.probabilities for a in second.answers]
    for answer in first.answers:
        branch = answer.branches[0]
        assert branch.prior_logprobs is not None
        expected = answer_compute(question=answer.question, branches=[branch], temperature=1.0, confidence="entropy")
        assert answer.probabilities == expected.probabilities
        assert answer.probabilities != answer.raw_probabilities


def test_request_characters_count_what_the_compile_tokenizes_until_past_the_limit():
    """Whether a request compiles off the event loop: its messages' texts (keys of their extras too) and its
    questions' instructions and option texts, each question's count kept on the question."""
    from inference.request_size import request_characters
    from inference.requests import EvaluationRequest, Message

    questions = (
        question_build(id="a", type="choice", instructions="Which?", criteria={"Red": None, "Blue": "the sky"}),
        question_build(id="b", type="noul", instructions=None, criteria=None),
        question_build(id="c", type="score", instructions="How much?", criteria=["low", {"level": "high"}]),
    )
    request = EvaluationRequest(
        conversation=(Message(role="user", content="hello", extra=(("name", "ann"),)),), questions=questions
    )
    messages = len("hello") + len("name") + len("ann")
    asked = len("Which?") + len("Red") + len("the sky") + len("Yes") + len("No") + len("How much?") + len("low")
    asked += len('{"level":"high"}')
    assert request_characters(request=request, limit=10**6) == messages + asked
    assert questions[0].characters == len("Which?Redthe sky")
    # Counting stops once past the limit: what decides is only whether the total is over it.
    assert messages < request_characters(request=request, limit=messages) < messages + asked

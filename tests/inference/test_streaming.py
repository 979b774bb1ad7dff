"""Answers streamed as their branches are scored (`plan_run(on_answer=...)`), against the fake SGLang behind a
proxy that holds chosen branches: an answer leaves while another question's branch is still unanswered."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from inference.backends.base import Generation
from inference.backends.sglang import SGLangBackend
from inference.debias import Priors
from inference.prompt_text import content_free_prefix
from inference.prompts import Budget, Plan, plan_compile
from inference.questions import question_build
from inference.requests import Message
from inference.runner import Outcome, plan_run
from inference.scoring import Answer, Scoring
from inference.streaming import AnswerStream
from inference.tuning import tuning_uniform
from testbed.qwen3 import qwen3_labels, qwen3_tokenizer
from tests.holding_proxy import Hold, ends_with, holding_proxy

# Debiased wherever a test gives priors.
SCORING = Scoring(confidence="entropy", tuning=tuning_uniform(temperature=1.0, debias=True))


def plan_of(n: int, *, permutations: int = 1) -> Plan:
    questions = [
        question_build(
            id=str(i),
            type="choice",
            instructions=f"Question {i}?",
            criteria={"Yes": "It is", "No": "It is not", "Maybe": "Unclear"},
        )
        for i in range(n)
    ]
    return plan_compile(
        conversation=(Message(role="user", content="A ticket."),),
        questions=questions,
        tokenizer=qwen3_tokenizer(),
        labels=qwen3_labels(),
        budget=Budget(32768, 262144),
        permutations=permutations,
    )


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.005)


class Streamed:
    """`plan_run` with `on_answer`, through a proxy holding the calls `hold` selects."""

    def __init__(self, *, url: str, plan: Plan, branch_mode: str, priors: Priors | None = None) -> None:
        self.answers: list[Answer] = []
        backend = SGLangBackend(url=url, model="m", tokenizer=qwen3_tokenizer(), branch_mode=branch_mode)  # type: ignore[arg-type]
        self.task: asyncio.Task[Outcome] = asyncio.create_task(
            plan_run(
                plan=plan, backend=backend, scoring=SCORING, timeout=30, priors=priors, on_answer=self.answers.append
            )
        )

    @property
    def ids(self) -> list[str]:
        return sorted(a.question_id for a in self.answers)


def same_answers(streamed: list[Answer], outcome: Outcome) -> bool:
    return sorted(streamed, key=lambda a: a.question_id) == sorted(outcome.answers, key=lambda a: a.question_id)


async def test_parallel_mode_sends_each_answer_while_another_branch_is_still_unanswered(fake):
    plan = plan_of(3)
    with holding_proxy(upstream=fake.url, hold=ends_with(plan.branches[1].suffix_ids)) as (proxy, url):
        run = Streamed(url=url, plan=plan, branch_mode="parallel")
        await asyncio.to_thread(proxy.wait_held, 1)
        await until(lambda: len(run.answers) == 2)
        assert run.ids == ["0", "2"] and not run.task.done()
        proxy.release()
        outcome = await run.task
    assert run.answers[-1].question_id == "1"
    assert same_answers(run.answers, outcome)


async def test_batched_mode_sends_every_answer_together_when_the_batch_returns(fake):
    plan = plan_of(3)
    with holding_proxy(upstream=fake.url, hold=ends_with(plan.branches[1].suffix_ids)) as (proxy, url):
        run = Streamed(url=url, plan=plan, branch_mode="batched")
        await asyncio.to_thread(proxy.wait_held, 1)
        await asyncio.sleep(0.2)
        assert run.answers == []
        proxy.release()
        outcome = await run.task
    assert run.ids == ["0", "1", "2"] and same_answers(run.answers, outcome)


def prior_of(plan: Plan, index: int, prefix: tuple[int, ...]) -> Hold:
    """The content-free prior call of branch `index`: the prior's prefix, then that branch's suffix."""
    suffix = ends_with(plan.branches[index].suffix_ids)
    return lambda body: suffix(body) and tuple(body["input_ids"][: len(prefix)]) == prefix


async def test_a_new_questions_answer_waits_for_its_prior_and_a_known_one_does_not(fake):
    plan = plan_of(3)
    priors = Priors(prefix_ids=content_free_prefix(tokenizer=qwen3_tokenizer()))
    with holding_proxy(upstream=fake.url, hold=prior_of(plan, 1, priors.prefix.ids)) as (proxy, url):
        first = Streamed(url=url, plan=plan, branch_mode="parallel", priors=priors)
        await asyncio.to_thread(proxy.wait_held, 1)
        await until(lambda: len(first.answers) == 2)
        assert first.ids == ["0", "2"]
        proxy.release()
        outcome = await first.task
        assert same_answers(first.answers, outcome)
        assert all(a.branches[0].prior_logprobs is not None for a in first.answers)

        calls = fake.generate_calls
        second = Streamed(url=url, plan=plan, branch_mode="parallel", priors=priors)
        again = await second.task
    assert fake.generate_calls - calls == 4  # the warm-up and three branches: every prior is cached now
    assert second.ids == ["0", "1", "2"] and same_answers(second.answers, again)
    assert [a.probabilities for a in again.answers] == [a.probabilities for a in outcome.answers]


async def test_with_option_orders_averaged_an_answer_needs_every_order(fake):
    plan = plan_of(2, permutations=3)
    assert [b.question.id for b in plan.branches] == ["0", "0", "0", "1", "1", "1"]
    with holding_proxy(upstream=fake.url, hold=ends_with(plan.branches[2].suffix_ids)) as (proxy, url):
        run = Streamed(url=url, plan=plan, branch_mode="parallel")
        await asyncio.to_thread(proxy.wait_held, 1)
        await until(lambda: len(run.answers) == 1)
        assert run.ids == ["1"]
        proxy.release()
        outcome = await run.task
    assert run.ids == ["0", "1"] and same_answers(run.answers, outcome)
    assert all(len(a.branches) == 3 for a in run.answers)


def test_a_report_after_the_evaluation_ended_is_not_sent():
    """A branch already inside llama.cpp when its evaluation was cancelled still reports; nobody must hear it."""
    plan = plan_of(1)
    sent: list[Any] = []
    stream = AnswerStream(plan=plan, prior_branches=(), priors=None, scoring=SCORING, sink=sent.append)
    stream.close()
    stream.scored(0, Generation(prompt_tokens=10, cached_tokens=0, label_logprobs=(-1.0, -2.0, -3.0)))
    assert sent == []


@pytest.mark.parametrize("branch_mode", ["batched", "parallel"])
async def test_streaming_changes_nothing_in_the_outcome(fake, branch_mode):
    plan = plan_of(4)
    backend = SGLangBackend(url=fake.url, model="m", tokenizer=qwen3_tokenizer(), branch_mode=branch_mode)  # type: ignore[arg-type]
    plain = await plan_run(plan=plan, backend=backend, scoring=SCORING, timeout=30)
    streamed: list[Answer] = []
    fake.reset(controls=False)
    outcome = await plan_run(plan=plan, backend=backend, scoring=SCORING, timeout=30, on_answer=streamed.append)
    assert outcome.answers == plain.answers and same_answers(streamed, outcome)
    assert outcome.generations == plain.generations == 5

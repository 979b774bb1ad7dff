"""The llama.cpp backend's tests share these: budgets and tolerances, plans and calls for it, and a
comparison of generations within llama.cpp's rounding noise."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any

from inference.backends.base import BranchCall, Generation
from inference.backends.llamacpp import LlamaCppBackend
from inference.labels import Labels
from inference.prompts import Budget, Plan, plan_compile
from inference.questions import Question, question_build, text_render
from inference.requests import conversation_of_text
from inference.scoring import Answer, BranchScore, answer_compute

BUDGET = Budget(max_input_tokens=8192, max_total_input_tokens=262144)
TOLERANCE = 1e-3
# Batch-shape rounding noise of llama.cpp's quantised CPU kernels (measured up to ~0.15 nats on this model).
ONE_SHOT_LOGPROB_TOLERANCE = 0.3
ONE_SHOT_PROBABILITY_TOLERANCE = 0.05
# One thread: llama.cpp's worker threads spin at barriers, so on a busy two-core machine (tests run in
# parallel with other suites) two threads can be several times slower than one.
THREADS = 1


def run[T](coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def answer_of(question: Question, generation: Generation) -> Answer:
    branch = BranchScore(order=tuple(range(len(question.options))), label_logprobs=generation.label_logprobs)
    return answer_compute(question=question, branches=[branch], temperature=1.0, confidence="entropy")


def plan_of(llama: LlamaCppBackend, labels: Labels, state: Any, questions: Sequence[Question]) -> Plan:
    """A text or structured state, as the API gives it to the core: one user message."""
    return plan_compile(
        conversation=conversation_of_text(text=text_render(state)),
        questions=questions,
        tokenizer=llama.tokenizer(),
        labels=labels,
        budget=BUDGET,
    )


def calls_of(plan: Plan, tag: str) -> list[BranchCall]:
    return [
        BranchCall(rid=f"{tag}-{i}", prefix=plan.prefix, suffix=b.suffix_ids, label_ids=b.label_ids)
        for i, b in enumerate(plan.branches)
    ]


async def evaluate(llama: LlamaCppBackend, plan: Plan, tag: str) -> tuple[Generation, list[Generation]]:
    warm = await llama.warm(rid=f"{tag}-warm", prefix=plan.prefix)
    return warm, await llama.score(calls=calls_of(plan, tag))


def generations_close(a: Sequence[Generation], b: Sequence[Generation]) -> bool:
    return all(
        len(x.label_logprobs) == len(y.label_logprobs)
        and all(abs(p - q) <= TOLERANCE for p, q in zip(x.label_logprobs, y.label_logprobs, strict=True))
        for x, y in zip(a, b, strict=True)
    )


def noul(instructions: str, id: str = "q") -> Question:
    return question_build(id=id, type="noul", instructions=instructions, criteria=None)


REVIEW = {"review": "Absolutely love it, works perfectly, five stars.", "product": "kettle"}
QUESTIONS = (
    noul("Is the review positive?", "positive"),
    question_build(
        id="topic",
        type="choice",
        instructions="What is the product?",
        criteria={"kettle": "A kettle", "car": "A car", "book": "A book"},
    ),
    question_build(
        id="stars",
        type="score",
        instructions="How satisfied is the reviewer?",
        criteria=["Unhappy", "Neutral", "Delighted"],
    ),
)

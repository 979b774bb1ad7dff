"""Several evaluations as one: one admission, every plan compiled before any backend call, all run
concurrently, the first failure cancelling the rest.

`POST /v1/classify` evaluates each input text as its own one-question evaluation: a 10-input request
takes one admission slot, not ten, and is bounded instead by the token budget summed over its inputs.
Each cancelled plan aborts its own backend requests (`plan_run`), so a failure or a client hanging up
spends no more backend time on answers nobody will read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from inference.errors import Problem, RequestInvalid
from inference.prompts import Plan
from inference.request_size import OFF_LOOP_CHARACTERS, request_characters
from inference.requests import EvaluationRequest
from inference.runner import Evaluator, Outcome, Timings, TokensReserve, Usage, plan_of, plan_run


async def evaluations_run(
    *, evaluator: Evaluator, requests: Sequence[EvaluationRequest], reserve: TokensReserve | None = None
) -> tuple[Outcome, ...]:
    """Admit once (Overloaded), compile every request (RequestInvalid with every problem of every
    request, located as `("requests", i, ...)`, or the total over all of them past the budget), reserve
    their prompt tokens together (`reserve` may refuse), then run them all concurrently; outcomes in the
    order of `requests`."""
    with evaluator.gate.admit():
        characters = 0
        for request in requests:
            characters += request_characters(request=request, limit=OFF_LOOP_CHARACTERS - characters)
            if characters > OFF_LOOP_CHARACTERS:
                break
        if characters > OFF_LOOP_CHARACTERS:
            compiled = await asyncio.to_thread(_plans_compile, evaluator=evaluator, requests=requests)
        else:
            compiled = _plans_compile(evaluator=evaluator, requests=requests)
        if reserve is not None:
            await reserve(sum(plan.input_tokens for plan, _ in compiled))
        return await _plans_run(evaluator=evaluator, compiled=compiled)


def _plans_compile(*, evaluator: Evaluator, requests: Sequence[EvaluationRequest]) -> list[tuple[Plan, float]]:
    compiled: list[tuple[Plan, float]] = []
    problems: list[Problem] = []
    for i, request in enumerate(requests):
        started = time.perf_counter()
        try:
            plan = plan_of(evaluator=evaluator, request=request)
        except RequestInvalid as exc:
            problems.extend(Problem(("requests", i, *p.loc), p.msg, p.type) for p in exc.problems)
            continue
        compiled.append((plan, (time.perf_counter() - started) * 1000.0))
    if problems:
        raise RequestInvalid(problems)
    total, limit = sum(plan.input_tokens for plan, _ in compiled), evaluator.budget.max_total_input_tokens
    if total > limit:
        raise RequestInvalid(
            [Problem(("requests",), f"{total} input tokens over all inputs, over the limit of {limit}", "too_long")]
        )
    return compiled


async def _plans_run(*, evaluator: Evaluator, compiled: Sequence[tuple[Plan, float]]) -> tuple[Outcome, ...]:
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [
                group.create_task(
                    plan_run(
                        plan=plan,
                        backend=evaluator.backend,
                        scoring=evaluator.scoring,
                        timeout=evaluator.timeout,
                        priors=evaluator.priors,
                        prepare_ms=prepare_ms,
                    )
                )
                for plan, prepare_ms in compiled
            ]
    except BaseExceptionGroup as failures:  # the first failure as itself; the rest were cancelled by it
        raise failures.exceptions[0] from None
    return tuple(task.result() for task in tasks)


def outcomes_merge(*, outcomes: Sequence[Outcome]) -> Outcome:
    """One outcome for evaluations run together, as stored: answers in order, tokens summed (prefix
    tokens too: each evaluation has its own prefix), prefill and branch times the slowest one's (they
    overlap), cached tokens None when any is unknown (never a guessed number)."""
    cached = [o.cached_tokens for o in outcomes]
    return Outcome(
        answers=tuple(a for o in outcomes for a in o.answers),
        usage=Usage(
            input_tokens=sum(o.usage.input_tokens for o in outcomes),
            output_tokens=sum(o.usage.output_tokens for o in outcomes),
        ),
        prefix_tokens=sum(o.prefix_tokens for o in outcomes),
        cached_tokens=None if any(c is None for c in cached) else sum(c for c in cached if c is not None),
        timings=Timings(
            prepare_ms=sum(o.timings.prepare_ms for o in outcomes),
            prefill_ms=max(o.timings.prefill_ms for o in outcomes),
            branches_ms=max(o.timings.branches_ms for o in outcomes),
            prefill_started_ns=min(o.timings.prefill_started_ns for o in outcomes),
        ),
        generations=sum(o.generations for o in outcomes),
    )

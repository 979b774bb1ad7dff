"""The evaluation runner: admission, warm-up barrier, branches, deadline, cancellation, timings.

The warm-up must finish before any branch starts, or the branches race the prefill and each pays
for the whole prefix. Any failure, timeout or cancellation (a client that hung up) aborts every
request of the evaluation on the backend, so no GPU time is spent on answers nobody will read.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from inference.backends.base import Backend, BranchCall, Generation
from inference.cancellation import abort_schedule
from inference.errors import EvaluationTimeout, Overloaded
from inference.labels import Label
from inference.prompts import Budget, Plan, plan_compile
from inference.questions import Question
from inference.scoring import Answer, ConfidenceFormula, answer_compute

_rid_counter = itertools.count()
_rid_prefix = f"oj-{os.getpid():x}-{os.urandom(3).hex()}"


@dataclass(frozen=True)
class Usage:
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class Timings:
    prepare_ms: float
    prefill_ms: float
    branches_ms: float


@dataclass(frozen=True)
class Outcome:
    answers: tuple[Answer, ...]
    usage: Usage
    prefix_tokens: int
    cached_tokens: int | None
    timings: Timings


@dataclass(frozen=True)
class Scoring:
    temperature: float
    confidence: ConfidenceFormula


class AdmissionGate:
    """Refuses (529) rather than queues once `limit` evaluations are active: a queue would only
    turn overload into timeouts, while a quick refusal lets the client's retry find a free replica."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.active = 0
        self._lock = threading.Lock()

    @contextmanager
    def admit(self) -> Iterator[None]:
        with self._lock:
            if self.active >= self.limit:
                raise Overloaded(f"{self.active} evaluations are active (limit {self.limit}); retry shortly")
            self.active += 1
        try:
            yield
        finally:
            with self._lock:
                self.active -= 1


@dataclass
class Engine:
    """Everything an evaluation needs, built once per process."""

    backend: Backend
    labels: tuple[Label, ...]
    budget: Budget
    scoring: Scoring
    gate: AdmissionGate
    timeout: float


def _rid() -> str:
    return f"{_rid_prefix}-{next(_rid_counter)}"


def _ms(start: float, end: float) -> float:
    return (end - start) * 1000.0


async def evaluation_run(*, engine: Engine, state: Any, questions: Sequence[Question]) -> Outcome:
    """Compile (422 on budgets), admit (529), then run the plan under the deadline (504)."""
    start = time.perf_counter()
    plan = plan_compile(
        state=state,
        questions=questions,
        tokenizer=engine.backend.tokenizer(),
        labels=engine.labels,
        budget=engine.budget,
    )
    prepared = time.perf_counter()
    with engine.gate.admit():
        return await plan_run(
            plan=plan,
            backend=engine.backend,
            scoring=engine.scoring,
            timeout=engine.timeout,
            prepare_ms=_ms(start, prepared),
        )


async def plan_run(
    *, plan: Plan, backend: Backend, scoring: Scoring, timeout: float, prepare_ms: float = 0.0
) -> Outcome:
    warm_rid = _rid()
    calls = [
        BranchCall(rid=_rid(), prefix=plan.prefix_ids, suffix=b.suffix_ids, label_ids=b.label_ids)
        for b in plan.branches
    ]
    pending = [warm_rid, *(c.rid for c in calls)]
    try:
        async with asyncio.timeout(timeout):
            t0 = time.perf_counter()
            warm = await backend.warm(rid=warm_rid, prefix_ids=plan.prefix_ids)
            pending.remove(warm_rid)
            t1 = time.perf_counter()
            generations = await backend.score(calls=calls)
            pending.clear()
            t2 = time.perf_counter()
    except TimeoutError as exc:
        await _abort(backend, pending)
        raise EvaluationTimeout(f"the evaluation took longer than {timeout:g} s") from exc
    except BaseException:
        await _abort(backend, pending)
        raise
    return _outcome(
        plan=plan,
        warm=warm,
        generations=generations,
        scoring=scoring,
        timings=Timings(prepare_ms=prepare_ms, prefill_ms=_ms(t0, t1), branches_ms=_ms(t1, t2)),
    )


async def _abort(backend: Backend, rids: list[str]) -> None:
    """In the background, so neither the admission slot nor the deadline waits for the backend; a
    cancelled request (client gone) still tells the backend to stop."""
    abort_schedule(backend=backend, rids=rids)


def _outcome(
    *, plan: Plan, warm: Generation, generations: Sequence[Generation], scoring: Scoring, timings: Timings
) -> Outcome:
    answers = tuple(
        answer_compute(
            question=b.question,
            logprobs=g.label_logprobs,
            temperature=scoring.temperature,
            confidence=scoring.confidence,
        )
        for b, g in zip(plan.branches, generations, strict=True)
    )
    cached = [g.cached_tokens for g in generations]
    return Outcome(
        answers=answers,
        usage=Usage(
            input_tokens=warm.prompt_tokens + sum(g.prompt_tokens for g in generations),
            output_tokens=len(generations) + 1,
        ),
        prefix_tokens=len(plan.prefix_ids),
        cached_tokens=None if any(c is None for c in cached) else sum(c for c in cached if c is not None),
        timings=timings,
    )

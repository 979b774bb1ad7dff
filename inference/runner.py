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
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from inference.backends.base import Backend, BranchCall, Generation
from inference.cancellation import abort_schedule
from inference.debias import Priors
from inference.errors import EvaluationTimeout, Overloaded
from inference.labels import Labels
from inference.prompts import Branch, Budget, Plan, PriorKey, plan_compile
from inference.questions import Question
from inference.request_size import OFF_LOOP_CHARACTERS, request_characters
from inference.requests import EvaluationRequest
from inference.scoring import Answer, BranchScore, Scoring, answer_compute
from inference.streaming import AnswerSink, AnswerStream, branch_score_build
from inference.vision import Vision

TokensReserve = Callable[[int], Awaitable[None]]
"""Called with the prompt tokens an evaluation will have the backend read, once they are counted and before any
backend call: the caller's per-key limits take them or refuse the evaluation by raising."""

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
    prefill_started_ns: int = 0
    """When the warm-up was sent (epoch nanoseconds): where a trace places prepare, prefill and branches."""


@dataclass(frozen=True)
class Outcome:
    answers: tuple[Answer, ...]
    usage: Usage
    prefix_tokens: int
    cached_tokens: int | None
    timings: Timings
    generations: int
    """Backend generations run: the warm-up, every branch and every prior measured."""


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
class Evaluator:
    """Everything an evaluation needs, built once per process: the backend, the labels validated
    against its tokenizer, the budgets, the scoring settings and the admission gate."""

    backend: Backend
    labels: Labels
    budget: Budget
    scoring: Scoring
    gate: AdmissionGate
    timeout: float
    priors: Priors | None = None
    """Set when answers are debiased against content-free priors."""
    vision: Vision | None = None
    """Set when the served model can see images (`inference.vision`); None refuses them."""


def _rid() -> str:
    return f"{_rid_prefix}-{next(_rid_counter)}"


def _ms(start: float, end: float) -> float:
    return (end - start) * 1000.0


async def evaluation_run(
    *,
    evaluator: Evaluator,
    request: EvaluationRequest,
    on_answer: AnswerSink | None = None,
    reserve: TokensReserve | None = None,
) -> Outcome:
    """Admit (Overloaded), compile (RequestInvalid on budgets), reserve the plan's prompt tokens (`reserve`
    may refuse), then run the plan under the deadline.

    Admission comes first so the work a request can cause (tokenising up to the body limit) is
    bounded by the number of admitted evaluations, and large requests tokenise off the event loop.
    `on_answer` receives each answer as soon as its branches are scored (`inference.streaming`).
    """
    start = time.perf_counter()
    with evaluator.gate.admit():
        plan = await plan_prepare(evaluator=evaluator, request=request)
        if reserve is not None:
            await reserve(plan.input_tokens)
        prepared = time.perf_counter()
        return await plan_run(
            plan=plan,
            backend=evaluator.backend,
            scoring=evaluator.scoring,
            timeout=evaluator.timeout,
            priors=evaluator.priors,
            prepare_ms=_ms(start, prepared),
            on_answer=on_answer,
        )


async def plan_prepare(*, evaluator: Evaluator, request: EvaluationRequest) -> Plan:
    """`plan_of`, in a worker thread when the request holds a lot of text."""
    if request_characters(request=request, limit=OFF_LOOP_CHARACTERS) > OFF_LOOP_CHARACTERS:
        return await asyncio.to_thread(plan_of, evaluator=evaluator, request=request)
    return plan_of(evaluator=evaluator, request=request)


def plan_of(*, evaluator: Evaluator, request: EvaluationRequest) -> Plan:
    """`plan_compile` for this evaluator (RequestInvalid on budgets)."""
    return plan_compile(
        conversation=request.conversation,
        questions=request.questions,
        tokenizer=evaluator.backend.tokenizer(),
        labels=evaluator.labels,
        budget=evaluator.budget,
        permutations=evaluator.scoring.permutations,
        vision=evaluator.vision,
    )


async def plan_run(
    *,
    plan: Plan,
    backend: Backend,
    scoring: Scoring,
    timeout: float,
    priors: Priors | None = None,
    prepare_ms: float = 0.0,
    on_answer: AnswerSink | None = None,
) -> Outcome:
    """Warm-up, then every branch (and the content-free prior of each question not measured yet);
    with `on_answer`, each answer is also handed over as soon as the generations it needs are in."""
    debiased = [b for b in plan.branches if scoring.of(b.question).debias] if priors else []
    known, unmeasured = priors.lookup(branches=debiased) if priors else ({}, [])
    warm_rid = _rid()
    calls = _calls_build(plan=plan, priors=priors, unmeasured=unmeasured)
    pending = [warm_rid, *(c.rid for c in calls)]
    stream = (
        None
        if on_answer is None
        else AnswerStream(
            plan=plan, prior_branches=unmeasured, priors=known if priors else None, scoring=scoring, sink=on_answer
        )
    )
    try:
        async with asyncio.timeout(timeout):
            t0, t0_ns = time.perf_counter(), time.time_ns()
            warm = await backend.warm(rid=warm_rid, prefix=plan.prefix)
            pending.remove(warm_rid)
            t1 = time.perf_counter()
            generations = await backend.score(calls=calls, scored=stream.scored if stream else None)
            pending.clear()
            t2 = time.perf_counter()
    except TimeoutError as exc:
        await _abort(backend, pending)
        raise EvaluationTimeout(f"the evaluation took longer than {timeout:g} s") from exc
    except BaseException:
        await _abort(backend, pending)
        raise
    finally:
        if stream is not None:
            stream.close()
    _priors_learn(priors=priors, known=known, unmeasured=unmeasured, generations=generations[len(plan.branches) :])
    answers = answers_compute(
        plan=plan, generations=generations[: len(plan.branches)], priors=known if priors else None, scoring=scoring
    )
    return Outcome(
        answers=answers,
        # Every prompt token the backend read (priors and extra option orders too); one output token per
        # question plus the warm-up's, as the wire contract counts them.
        usage=Usage(
            input_tokens=warm.prompt_tokens + sum(g.prompt_tokens for g in generations), output_tokens=len(answers) + 1
        ),
        prefix_tokens=len(plan.prefix.ids),
        cached_tokens=_cached_sum(generations),
        timings=Timings(
            prepare_ms=prepare_ms, prefill_ms=_ms(t0, t1), branches_ms=_ms(t1, t2), prefill_started_ns=t0_ns
        ),
        generations=1 + len(generations),
    )


def _calls_build(*, plan: Plan, priors: Priors | None, unmeasured: Sequence[Branch]) -> list[BranchCall]:
    """One backend call per branch, then one per content-free prior not measured yet: priors go last, so the
    llama.cpp backend keeps the evaluation's prefix cached for every real branch."""
    calls = [
        BranchCall(rid=_rid(), prefix=plan.prefix, suffix=b.suffix_ids, label_ids=b.label_ids, images=b.images)
        for b in plan.branches
    ]
    calls += [
        BranchCall(rid=_rid(), prefix=priors.prefix, suffix=b.suffix_ids, label_ids=b.label_ids, images=b.images)
        for b in unmeasured
        if priors
    ]
    return calls


def _priors_learn(
    *,
    priors: Priors | None,
    known: dict[PriorKey, tuple[float, ...]],
    unmeasured: Sequence[Branch],
    generations: Sequence[Generation],
) -> None:
    """The priors just measured (`generations`, one per unmeasured branch), for this evaluation's answers and
    remembered for the next ones."""
    for branch, generation in zip(unmeasured, generations, strict=True):
        known[branch.prior_key] = generation.label_logprobs
        if priors:
            priors.remember(branch=branch, label_logprobs=generation.label_logprobs)


async def _abort(backend: Backend, rids: list[str]) -> None:
    """In the background, so neither the admission slot nor the deadline waits for the backend; a
    cancelled request (client gone) still tells the backend to stop."""
    abort_schedule(backend=backend, rids=rids)


def answers_compute(
    *,
    plan: Plan,
    generations: Sequence[Generation],
    priors: dict[PriorKey, tuple[float, ...]] | None,
    scoring: Scoring,
) -> tuple[Answer, ...]:
    """One answer per question from its branches (consecutive in the plan, one per option order),
    scored as its shape is tuned (`priors` are used only where that shape debiases)."""
    grouped: dict[str, tuple[Question, list[BranchScore]]] = {}
    for branch, generation in zip(plan.branches, generations, strict=True):
        scores = grouped.setdefault(branch.question.id, (branch.question, []))[1]
        scores.append(branch_score_build(branch=branch, generation=generation, priors=priors, scoring=scoring))
    return tuple(
        answer_compute(
            question=question,
            branches=scores,
            temperature=scoring.of(question).temperature,
            confidence=scoring.confidence,
        )
        for question, scores in grouped.values()
    )


def _cached_sum(generations: Sequence[Generation]) -> int | None:
    """Cache hits over all generations; None when any is unknown (never a guessed number)."""
    cached = [g.cached_tokens for g in generations]
    return None if any(c is None for c in cached) else sum(c for c in cached if c is not None)

"""One `POST /v1/classify` request: every input evaluated concurrently under one admission.

Each input text is the state of one plan (warm-up + one branch, exactly as a one-question System One
call), and all inputs of a request run concurrently under *one* admission: a 10-input request takes
one slot of `MAX_CONCURRENT_REQUESTS`, not ten, and is bounded instead by `MAX_CLASSIFY_INPUTS` and the
token budgets (summed over its inputs).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from api.classify.parsing import classify_request_parse
from api.classify.registry import ClassifierSpec, classifier_find
from api.errors import ApiError
from api.ratelimits import rate_limited
from api.recording import evaluation_recorded
from audit.callers import Caller
from audit.storage.records import ClassifierLink, Received
from calibration.applied import calibrating_get, outcome_calibrated
from inference.errors import RequestInvalid
from inference.prompts import Plan, plan_compile
from inference.questions import Question
from inference.requests import conversation_of_text
from inference.runner import OFF_LOOP_CHARACTERS, Evaluator, Outcome, Timings, Usage, plan_run, text_size
from serving.evaluator import evaluator_get

INVALID_NAME = "(invalid)"
"""Stored as the classifier of a request whose `model` is missing or not a string."""


@dataclass(frozen=True)
class ClassifyItem:
    index: int
    label: str
    probs: tuple[float, ...]


@dataclass(frozen=True)
class Classified:
    """One answered classification request: per-input results and the merged outcome that is stored."""

    request_id: str
    created: int
    classifier: ClassifierSpec
    served_model: str
    items: tuple[ClassifyItem, ...]
    outcome: Outcome


def _plans_compile(*, evaluator: Evaluator, question: Question, inputs: Sequence[str]) -> list[tuple[Plan, float]]:
    """One plan per input, with its compile time; every budget problem of every input as one 400,
    before any backend call. The total budget applies to the request, over all its inputs."""
    tokenizer = evaluator.backend.tokenizer()
    compiled, problems = [], []
    for i, text in enumerate(inputs):
        started = time.perf_counter()
        try:
            plan = plan_compile(conversation=conversation_of_text(text=text), questions=(question,),
                                tokenizer=tokenizer, labels=evaluator.labels, budget=evaluator.budget,
                                permutations=evaluator.scoring.permutations)
        except RequestInvalid as exc:
            problems.append(f"input[{i}] is too long: " + "; ".join(p.msg for p in exc.problems))
            continue
        compiled.append((plan, (time.perf_counter() - started) * 1000.0))
    if problems:
        raise ApiError(400, "invalid_request", "; ".join(problems))
    total = sum(plan.input_tokens for plan, _ in compiled)
    if total > evaluator.budget.max_total_input_tokens:
        raise ApiError(400, "invalid_request", f"the request needs {total} input tokens over all inputs, over the "
                                               f"limit of {evaluator.budget.max_total_input_tokens}; send fewer or "
                                               "shorter texts per request")
    return compiled


async def _plans_run(*, evaluator: Evaluator, compiled: Sequence[tuple[Plan, float]]) -> list[Outcome]:
    """Every plan concurrently; the first failure (or the client hanging up) cancels the others, and
    each cancelled plan aborts its own backend requests (`plan_run`)."""
    tasks = [asyncio.ensure_future(plan_run(plan=plan, backend=evaluator.backend, scoring=evaluator.scoring,
                                            timeout=evaluator.timeout, priors=evaluator.priors,
                                            prepare_ms=prepare_ms))
             for plan, prepare_ms in compiled]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    failed = next((t for t in tasks if t.done() and not t.cancelled() and t.exception() is not None), None)
    if failed is not None:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        error = failed.exception()
        assert error is not None
        raise error
    return [task.result() for task in tasks]


def _outcomes_merge(outcomes: Sequence[Outcome]) -> Outcome:
    """One outcome for the request, as stored: answers in input order, tokens summed (prefix tokens too:
    each input has its own prefix), prefill and branch times the slowest input's (they overlap)."""
    cached = [o.cached_tokens for o in outcomes]
    return Outcome(
        answers=tuple(o.answers[0] for o in outcomes),
        usage=Usage(input_tokens=sum(o.usage.input_tokens for o in outcomes),
                    output_tokens=sum(o.usage.output_tokens for o in outcomes)),
        prefix_tokens=sum(o.prefix_tokens for o in outcomes),
        cached_tokens=None if any(c is None for c in cached) else sum(c for c in cached if c is not None),
        timings=Timings(prepare_ms=sum(o.timings.prepare_ms for o in outcomes),
                        prefill_ms=max(o.timings.prefill_ms for o in outcomes),
                        branches_ms=max(o.timings.branches_ms for o in outcomes)),
        generations=sum(o.generations for o in outcomes),
    )


async def classifier_evaluate(*, evaluator: Evaluator, classifier: ClassifierSpec, inputs: Sequence[str]) -> Outcome:
    """Admit once (529), compile (400 on budgets; off the event loop when the inputs are long), run every
    input concurrently (504/502/503)."""
    question = classifier.question
    assert question is not None, "classifier_find never returns an unservable classifier"
    with evaluator.gate.admit():
        if text_size(value=list(inputs), limit=OFF_LOOP_CHARACTERS) > OFF_LOOP_CHARACTERS:
            compiled = await asyncio.to_thread(_plans_compile, evaluator=evaluator, question=question, inputs=inputs)
        else:
            compiled = _plans_compile(evaluator=evaluator, question=question, inputs=inputs)
        outcomes = await _plans_run(evaluator=evaluator, compiled=compiled)
    return _outcomes_merge(outcomes)


def received_of(*, data: Any, classifier: ClassifierSpec | None) -> Received:
    """The request as storage keeps it: the input(s) as the state, and the classifier's question as it
    was asked (so the audit shows what the model saw even after the classifier is edited). Recorded
    even for a request without a usable name, so the row still reads as a classification."""
    body = data if isinstance(data, dict) else {}
    name, texts = body.get("model"), body.get("input")
    link = ClassifierLink(id=classifier.id if classifier else None,
                          name=name if isinstance(name, str) and name else INVALID_NAME)
    return Received(requested_model=name if isinstance(name, str) else "",
                    question_count=len(texts) if isinstance(texts, list) else int(isinstance(texts, str)),
                    question_types=(classifier.type,) if classifier else (), state=texts,
                    questions={classifier.name: classifier.definition} if classifier else None, classifier=link,
                    api="classify")


async def classify_run(*, data: Any, request_id: str, caller: Caller | None,
                       classifier: ClassifierSpec | None = None) -> Classified:
    """Validate (400), find the classifier (404), evaluate every input on the process's evaluator.

    Like `systemone_evaluate`, every call is recorded, answered or failed, linked to its classifier.
    The admin's "try it" passes the `classifier` it shows (read fresh from the database) instead of
    the cached one.
    """
    config = settings.OPENJEV
    found: ClassifierSpec | None = None
    with evaluation_recorded(request_id=request_id, caller=caller,
                             unparsed=lambda: received_of(data=data, classifier=found)) as call:
        request = classify_request_parse(data=data, max_inputs=config.max_classify_inputs)
        if classifier is not None and classifier.problem:
            raise ApiError(404, "not_found", f"classifier {classifier.name!r} cannot be served: {classifier.problem}")
        found = classifier if classifier is not None else await classifier_find(name=request.model)
        call.received = received_of(data=data, classifier=found)
        async with rate_limited(call=call):
            call.evaluator = evaluator = await evaluator_get()
            outcome = await classifier_evaluate(evaluator=evaluator, classifier=found, inputs=request.inputs)
            calibrating = await calibrating_get(caller=caller, classifier=found.name)
            call.outcome = outcome = outcome_calibrated(outcome=outcome, calibrating=calibrating)
    items = tuple(ClassifyItem(index=i, label=found.labels[answer.choice_index], probs=answer.probabilities)
                  for i, answer in enumerate(outcome.answers))
    return Classified(request_id=request_id, created=int(call.created_at.timestamp()), classifier=found,
                      served_model=evaluator.backend.model, items=items, outcome=outcome)

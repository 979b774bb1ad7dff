"""One `POST /v1/classify` request: every input evaluated concurrently under one admission.

Each input text is the state of one plan (warm-up + one branch, exactly as a one-question System One
call), run together by the core's `evaluations_run`: a 10-input request takes one slot of
`MAX_CONCURRENT_REQUESTS`, not ten, and is bounded instead by `MAX_CLASSIFY_INPUTS` and the token
budgets (summed over its inputs).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from api.classify.parsing import classify_request_parse
from api.classify.registry import ClassifierSpec, classifier_find
from api.plumbing.api_error import ApiError
from api.plumbing.bodies import Body, request_parsed
from api.plumbing.evaluate import evaluations_calibrated
from api.plumbing.formats import FormatCheck
from api.plumbing.ratelimits import Admission
from api.plumbing.recording import evaluation_recorded
from audit.callers import Caller
from audit.storage.records import ClassifierLink, Received
from inference.errors import Problem, RequestInvalid
from inference.requests import EvaluationRequest, conversation_of_text
from inference.runner import Outcome

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


def classifier_requests(*, classifier: ClassifierSpec, inputs: Sequence[str]) -> list[EvaluationRequest]:
    """Every input as a one-question evaluation of the classifier's question."""
    question = classifier.question
    assert question is not None, "classifier_find never returns an unservable classifier"
    return [EvaluationRequest(conversation=conversation_of_text(text=text), questions=(question,)) for text in inputs]


def _problems_text(problems: Sequence[Problem]) -> str:
    """The core's problems as classify words them: `input[i] is too long: ...` per input, or the
    request's total over all inputs."""
    per_input: dict[int, list[str]] = {}
    for problem in problems:
        match problem.loc:
            case ("requests", int(index), *_):
                per_input.setdefault(index, []).append(problem.msg)
            case _:
                return f"the request needs {problem.msg}; send fewer or shorter texts per request"
    return "; ".join(f"input[{i}] is too long: " + "; ".join(msgs) for i, msgs in per_input.items())


def received_of(*, data: Any, classifier: ClassifierSpec | None) -> Received:
    """The request as storage keeps it: the input(s) as the state, and the classifier's question as it
    was asked (so the audit shows what the model saw even after the classifier is edited). Recorded
    even for a request without a usable name, so the row still reads as a classification."""
    body = data if isinstance(data, dict) else {}
    name, texts = body.get("model"), body.get("input")
    link = ClassifierLink(
        id=classifier.id if classifier else None, name=name if isinstance(name, str) and name else INVALID_NAME
    )
    return Received(
        requested_model=name if isinstance(name, str) else "",
        question_count=len(texts) if isinstance(texts, list) else int(isinstance(texts, str)),
        question_types=(classifier.type,) if classifier else (),
        state=texts,
        questions={classifier.name: classifier.definition} if classifier else None,
        classifier=link,
        api="classify",
    )


def classify_check() -> FormatCheck:
    """How a body of this route is parsed under the settings now in force; a body that could
    not be parsed names no classifier."""
    return FormatCheck(
        parse=functools.partial(classify_request_parse, max_inputs=settings.OPENJEV.max_classify_inputs),
        unparsed=functools.partial(received_of, classifier=None),
    )


async def classify_run(
    *,
    body: Body,
    request_id: str,
    caller: Caller | None,
    classifier: ClassifierSpec | None = None,
    admission: Admission | None = None,
) -> Classified:
    """Validate (400; a large body in the body lane, unless the view parsed it there already), find the
    classifier (404), evaluate every input on the process's evaluator.

    Like `systemone_evaluate`, every call is recorded, answered or failed, linked to its classifier.
    The admin's "try it" passes the `classifier` it shows (read fresh from the database) instead of
    the cached one.
    """
    check, data = classify_check(), body.data
    async with evaluation_recorded(
        request_id=request_id, caller=caller, unparsed=lambda: check.unparsed(data=data)
    ) as call:
        request = await request_parsed(body=body, check=check)
        if classifier is not None and classifier.problem:
            raise ApiError(404, "not_found", f"classifier {classifier.name!r} cannot be served: {classifier.problem}")
        found = classifier if classifier is not None else await classifier_find(name=request.model)
        call.received = received_of(data=data, classifier=found)
        # Every input under one admission, every budget problem of every input as one 400 before any backend
        # call, the first failure cancelling the rest (504/502/503), calibrated as every format's answers are.
        try:
            outcome = await evaluations_calibrated(
                call=call,
                requests=classifier_requests(classifier=found, inputs=request.inputs),
                classifier=found.name,
                admission=admission,
            )
        except RequestInvalid as exc:
            raise ApiError(400, "invalid_request", _problems_text(exc.problems)) from None
        assert call.evaluator is not None, "an evaluated call names its evaluator"
        evaluator = call.evaluator
    items = tuple(
        ClassifyItem(index=i, label=found.labels[answer.choice_index], probs=answer.probabilities)
        for i, answer in enumerate(outcome.answers)
    )
    return Classified(
        request_id=request_id,
        created=int(call.created_at.timestamp()),
        classifier=found,
        served_model=evaluator.backend.model,
        items=items,
        outcome=outcome,
    )

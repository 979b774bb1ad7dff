"""`POST /v1/decisions` behind its view: parsed once, evaluated as System One evaluates, recorded however
it ends. Problems become OpenAI's 400 naming the field (`param`), whether the parser or the core found
them, so the stored failure is what the client got."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.conf import settings

from api.checking.json_body import Loc
from api.checking.limits import Limits, limits_configured
from api.decisions.parsing import DecisionsRequest, decisions_request_parse
from api.decisions.questions import MAX_LEVELS
from api.plumbing.api_error import ApiError
from api.plumbing.bodies import Body
from api.plumbing.evaluate import images_accepted
from api.plumbing.formats import FormatCheck
from api.plumbing.ratelimits import Admission
from api.plumbing.recording import received_of_body
from api.plumbing.sequence import Hooks, evaluation_sequenced, model_unknown_answered
from audit.callers import Caller
from audit.storage.records import Received
from inference.errors import PROBLEMS_TEXT_MAX, Problem, RequestInvalid, loc_bounded
from inference.runner import Outcome

GENERIC_CODES = {"missing": "missing_required_parameter", "extra_forbidden": "unknown_parameter"}
"""The core's and the body checks' problem types, as OpenAI's error codes name them."""

CORE_TYPES = {"predicate": "noul", "choice": "choice", "score": "score"}
"""Each question type of the Decisions API as the core names it."""


@dataclass(frozen=True)
class Decided:
    request_id: str
    request: DecisionsRequest
    model: str
    """The model the backend served."""
    outcome: Outcome
    refusal_below: float
    """Answers with a label mass under this are refusals."""


def decisions_limits() -> Limits:
    """What one request may ask on this route: OpenAI's own counts of questions (up to 400;
    `OPENJEV_MAX_DECISIONS_QUESTIONS`) and of score levels (10); the shared limits otherwise."""
    return limits_configured(max_questions=settings.OPENJEV.max_decisions_questions, max_levels=MAX_LEVELS)


def decisions_check() -> FormatCheck:
    """How a body of this route is parsed under the settings now in force (`Hooks.check`)."""
    return FormatCheck(
        parse=functools.partial(
            decisions_request_parse, limits=decisions_limits(), models=settings.OPENJEV.language_model_names
        ),
        unparsed=functools.partial(received_of_body, api="decisions", state="input", keyed=False, kinds=CORE_TYPES),
    )


def decisions_limits_shown() -> dict[str, int]:
    """`GET /v1/limits`' block for this route."""
    limits = decisions_limits()
    return {
        "max_questions": limits.max_questions,
        "max_choices": limits.max_answers,
        "max_levels": limits.levels,
        "max_images": images_accepted(),
    }


def param_of(*, loc: Loc, request: DecisionsRequest | None = None) -> str | None:
    """A location as OpenAI names a field: `questions[2].choices[0].value`. The core locates problems at
    `state` (the input) or at a question's id, which `request` turns back into its position."""
    if not loc:
        return None
    head, *rest = loc_bounded(loc)
    if head == "state":
        head = "input"
    elif head == "questions" and rest and isinstance(loc[1], str) and request is not None:
        rest[0] = request.position_of(question_id=loc[1])
    text = str(head)
    for part in rest:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def invalid_of(*, problems: tuple[Problem, ...], request: DecisionsRequest | None = None) -> ApiError:
    """Every problem in one 400: the message lists them all, `param` and `code` name the first."""
    named = [(param_of(loc=p.loc, request=request), p) for p in problems[:PROBLEMS_TEXT_MAX]]
    message = "; ".join(f"{param}: {p.msg}" if param else p.msg for param, p in named)
    if len(problems) > PROBLEMS_TEXT_MAX:
        message += f"; and {len(problems) - PROBLEMS_TEXT_MAX} more"
    first = problems[0]
    return ApiError(400, GENERIC_CODES.get(first.type, first.type), message, problems=problems, param=named[0][0])


@contextmanager
def problems_answered(*, request: DecisionsRequest | None) -> Iterator[None]:
    try:
        yield
    except RequestInvalid as exc:
        raise invalid_of(problems=tuple(exc.problems), request=request) from None


def received_of(request: DecisionsRequest, *, refusal_below: float) -> Received:
    evaluation = request.evaluation
    return Received(
        requested_model=request.model,
        question_count=len(evaluation.questions),
        question_types=tuple(sorted({q.type for q in evaluation.questions})),
        state=request.input,
        questions=request.questions,
        images=tuple(image.meta for image in evaluation.images),
        api="decisions",
        safety_identifier=request.safety_identifier,
        prompt_cache_key=request.prompt_cache_key,
        refusal_below=refusal_below,
    )


async def decisions_evaluate(
    *, body: Body, request_id: str, caller: Caller | None, admission: Admission | None = None
) -> Decided:
    """Validate (400 naming the field; 404 for a model not served), evaluate and calibrate as System One
    does (the same admission, deadlines and errors), record; a large body is validated in the body lane (unless
    the view parsed it there already)."""
    config = settings.OPENJEV
    hooks = Hooks[DecisionsRequest](
        check=decisions_check(),
        received=functools.partial(received_of, refusal_below=config.refusal_label_mass),
        images=decisions_limits().images,
        problems=lambda request: problems_answered(request=request),
        refused=model_unknown_answered(
            message=lambda model: (
                f"The model {model} does not exist on this server; use {config.model_alias} or {config.model}"
            )
        ),
    )
    done = await evaluation_sequenced(body=body, hooks=hooks, request_id=request_id, caller=caller, admission=admission)
    return Decided(
        request_id=request_id,
        request=done.request,
        model=done.model,
        outcome=done.outcome,
        refusal_below=config.refusal_label_mass,
    )

"""A Google Decisions body behind `POST /v1/decisions`: parsed once, evaluated as System One evaluates, recorded
however it ends. Problems, whether the parser or the core found them, become Google's 400 naming every field at
fault, so the stored failure is what the client got."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.conf import settings

from api.checking.limits import Limits, limits_configured
from api.google.contract import MODEL_PREFIX
from api.google.errors import field_of
from api.google.parsing import GoogleRequest, google_request_parse
from api.plumbing.api_error import ApiError
from api.plumbing.bodies import Body
from api.plumbing.evaluate import images_accepted
from api.plumbing.formats import FormatCheck
from api.plumbing.ratelimits import Admission
from api.plumbing.recording import received_of_body
from api.plumbing.sequence import Hooks, evaluation_sequenced, model_unknown_answered
from audit.callers import Caller
from audit.storage.records import Api, Received
from inference.errors import PROBLEMS_TEXT_MAX, Problem, RequestInvalid
from inference.runner import Outcome

API: Api = "google"
"""The name its calls are stored and counted under (`Evaluation.api`)."""


@dataclass(frozen=True)
class GoogleDecided:
    request_id: str
    request: GoogleRequest
    model: str
    """The model the backend served."""
    outcome: Outcome


def google_limits() -> Limits:
    """What one request may ask: the questions of one `POST /v1/decisions` (`OPENJEV_MAX_DECISIONS_QUESTIONS`, 400;
    Google's API takes 1000), and the shared limits otherwise (options and levels: `OPENJEV_MAX_ANSWERS`, 255, as
    Google's)."""
    return limits_configured(max_questions=settings.OPENJEV.max_decisions_questions)


def google_check() -> FormatCheck:
    """How a body of this shape is parsed under the settings now in force (`Hooks.check`)."""
    return FormatCheck(
        parse=functools.partial(
            google_request_parse, limits=google_limits(), models=settings.OPENJEV.language_model_names
        ),
        unparsed=functools.partial(received_of_body, api=API, state="input", keyed=True),
    )


def google_limits_shown() -> dict[str, int]:
    """`GET /v1/limits`' block for this shape."""
    limits = google_limits()
    return {
        "max_questions": limits.max_questions,
        "max_choices": limits.max_answers,
        "max_levels": limits.levels,
        "max_images": images_accepted(),
    }


def invalid_of(*, problems: tuple[Problem, ...]) -> ApiError:
    """Every problem in one 400: the message lists them (`field: what`), the error's `details` each one."""
    message = "; ".join(
        f"{field}: {p.msg}" if (field := field_of(loc=p.loc)) else p.msg for p in problems[:PROBLEMS_TEXT_MAX]
    )
    if len(problems) > PROBLEMS_TEXT_MAX:
        message += f"; and {len(problems) - PROBLEMS_TEXT_MAX} more"
    return ApiError(400, problems[0].type, message, problems=problems, param=field_of(loc=problems[0].loc) or None)


@contextmanager
def problems_answered(*, core: bool = False) -> Iterator[None]:
    """RequestInvalid as Google's 400; the `core`'s problems (what only the evaluation can check: token budgets,
    images the model cannot see) are located at System One's `state`, which is this shape's `input`."""
    try:
        yield
    except RequestInvalid as exc:
        problems = tuple(
            Problem(("input", *p.loc[1:]), p.msg, p.type) if core and p.loc[:1] == ("state",) else p
            for p in exc.problems
        )
        raise invalid_of(problems=problems) from None


def received_of(request: GoogleRequest) -> Received:
    evaluation = request.evaluation
    return Received(
        requested_model=request.model,
        question_count=len(evaluation.questions),
        question_types=tuple(sorted({q.type for q in evaluation.questions})),
        state=request.input,
        questions=request.questions,
        images=tuple(image.meta for image in evaluation.images),
        api=API,
    )


async def google_evaluate(
    *, body: Body, request_id: str, caller: Caller | None, admission: Admission | None = None
) -> GoogleDecided:
    """Validate (400 naming every field at fault; 404 for a model not served), evaluate and calibrate as System
    One does (the same admission, deadlines and errors), record; a large body is validated in the body lane (unless
    the view parsed it there already)."""
    config = settings.OPENJEV
    hooks = Hooks[GoogleRequest](
        check=google_check(),
        received=received_of,
        images=google_limits().images,
        problems=lambda request: problems_answered(core=request is not None),
        refused=model_unknown_answered(
            message=lambda model: (
                f"{model} is not found on this server; use {MODEL_PREFIX}{config.model_alias} "
                f"or {MODEL_PREFIX}{config.model} (the prefix is optional)"
            )
        ),
    )
    done = await evaluation_sequenced(body=body, hooks=hooks, request_id=request_id, caller=caller, admission=admission)
    return GoogleDecided(request_id=request_id, request=done.request, model=done.model, outcome=done.outcome)

"""A Google Decisions body behind `POST /v1/decisions`: parsed once, evaluated as System One evaluates, recorded
however it ends. Problems, whether the parser or the core found them, become Google's 400 naming every field at
fault, so the stored failure is what the client got."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from api.checking.limits import Limits, ModelUnknown, limits_configured
from api.google.errors import field_of
from api.google.parsing import MODEL_PREFIX, GoogleRequest, google_request_parse
from api.plumbing.api_error import ApiError
from api.plumbing.body_lane import body_lane_run
from api.plumbing.evaluate import evaluation_calibrated, hosted_images_fetched, images_accepted
from api.plumbing.metering import phase_timed
from api.plumbing.ratelimits import Admission
from api.plumbing.recording import evaluation_recorded, received_of_body
from audit.callers import Caller
from audit.storage.records import Api, Received
from inference.errors import PROBLEMS_TEXT_MAX, Problem, RequestInvalid, value_quoted
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


def received_of(*, request: GoogleRequest) -> Received:
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
    *, data: Any, request_id: str, caller: Caller | None, size: int = 0, admission: Admission | None = None
) -> GoogleDecided:
    """Validate (400 naming every field at fault; 404 for a model not served), evaluate and calibrate as System
    One does (the same admission, deadlines and errors), record; a body of `size` bytes or more is validated in the
    body lane."""
    config = settings.OPENJEV
    limits = google_limits()
    async with evaluation_recorded(
        request_id=request_id,
        caller=caller,
        unparsed=lambda: received_of_body(data=data, api=API, state="input", keyed=True),
    ) as call:
        try:
            with problems_answered():
                parse = functools.partial(
                    google_request_parse, data=data, limits=limits, models=config.language_model_names
                )
                with phase_timed("validate"):
                    request = await body_lane_run(work=parse, size=size)
        except ModelUnknown as exc:
            raise ApiError(
                404,
                "model_not_found",
                f"{value_quoted(str(exc))} is not found on this server; use {MODEL_PREFIX}{config.model_alias} "
                f"or {MODEL_PREFIX}{config.model} (the prefix is optional)",
                param="model",
            ) from None
        call.received = received_of(request=request)
        with problems_answered(core=True):
            request = await hosted_images_fetched(
                call=call, request=request, limits=limits.images, received=lambda r: received_of(request=r)
            )
            outcome = await evaluation_calibrated(call=call, request=request.evaluation, admission=admission)
    assert call.evaluator is not None, "an evaluated call names its evaluator"
    return GoogleDecided(request_id=request_id, request=request, model=call.evaluator.backend.model, outcome=outcome)

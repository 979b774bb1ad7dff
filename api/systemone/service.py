"""`POST /v1/systemone` behind its view: one evaluation, parsed once, recorded however it ends."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from django.conf import settings

from api.checking.limits import limits_configured
from api.plumbing.api_error import ApiError
from api.plumbing.bodies import Body
from api.plumbing.formats import FormatCheck
from api.plumbing.ratelimits import Admission
from api.plumbing.recording import received_of_body
from api.plumbing.sequence import Hooks, evaluation_sequenced
from api.systemone.parsing import SystemOneRequest, WrongRoute, systemone_request_parse
from audit.callers import Caller
from audit.storage.records import Received
from inference.runner import Outcome
from inference.streaming import AnswerSink


@dataclass(frozen=True)
class Served:
    request_id: str
    request: SystemOneRequest
    model: str
    """The model the backend served (not the name the request used)."""
    outcome: Outcome


def received_of(request: SystemOneRequest) -> Received:
    """What storage is handed: the JSON as sent and the images' metadata (the writer thread drops image bytes
    when it builds the row, off the request path)."""
    return Received(
        requested_model=request.model,
        question_count=len(request.evaluation.questions),
        question_types=tuple(sorted({q.type for q in request.evaluation.questions})),
        state=request.state,
        questions=request.questions,
        images=tuple(image.meta for image in request.evaluation.images),
    )


def systemone_check() -> FormatCheck:
    """How a body of this route is parsed under the settings now in force (`Hooks.check`)."""
    return FormatCheck(
        parse=functools.partial(
            systemone_request_parse, limits=limits_configured(), models=settings.OPENJEV.language_model_names
        ),
        unparsed=functools.partial(received_of_body, api="systemone", state="state", keyed=True),
        parts=True,
    )


async def systemone_evaluate(
    *,
    body: Body,
    request_id: str,
    caller: Caller | None,
    admission: Admission | None = None,
    on_answer: AnswerSink | None = None,
) -> Served:
    """Validate (RequestInvalid; a large body in the body lane, unless the view parsed it there already), then
    evaluate and calibrate (`evaluation_calibrated`); `on_answer` gets each answer as soon as it is scored (the
    stream); `admission` holds the caller's limits (its tokens are reserved once counted)."""
    hooks = Hooks[SystemOneRequest](
        check=systemone_check(),
        received=received_of,
        images=limits_configured().images,
        refused=lambda error: ApiError(400, "wrong_route", str(error)) if isinstance(error, WrongRoute) else None,
    )
    done = await evaluation_sequenced(
        body=body,
        hooks=hooks,
        request_id=request_id,
        caller=caller,
        admission=admission,
        on_answer=on_answer,
    )
    return Served(request_id=request_id, request=done.request, model=done.model, outcome=done.outcome)

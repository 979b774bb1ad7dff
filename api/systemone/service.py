"""`POST /v1/systemone` behind its view: one evaluation, parsed once, recorded however it ends."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from api.checking.limits import limits_configured
from api.plumbing.api_error import ApiError
from api.plumbing.body_lane import body_lane_run
from api.plumbing.evaluate import evaluation_calibrated, hosted_images_fetched
from api.plumbing.metering import phase_timed
from api.plumbing.ratelimits import Admission
from api.plumbing.recording import evaluation_recorded, received_of_body
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


def received_of(*, request: SystemOneRequest) -> Received:
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


async def systemone_evaluate(
    *,
    data: Any,
    request_id: str,
    caller: Caller | None,
    size: int = 0,
    admission: Admission | None = None,
    on_answer: AnswerSink | None = None,
    parts: dict[str, bytes] | None = None,
) -> Served:
    """Validate (RequestInvalid), then evaluate and calibrate (`evaluation_calibrated`); `on_answer` gets each
    answer as soon as it is scored (the stream); `parts` are a multipart body's image parts; `size` is the body's
    bytes (a large one is validated in the body lane); `admission` holds the caller's limits (its tokens are
    reserved once counted)."""
    config = settings.OPENJEV
    limits = limits_configured()
    async with evaluation_recorded(
        request_id=request_id,
        caller=caller,
        unparsed=lambda: received_of_body(data=data, api="systemone", state="state", keyed=True),
    ) as call:
        parse = functools.partial(
            systemone_request_parse, data=data, limits=limits, models=config.language_model_names, parts=parts
        )
        with phase_timed("validate"):
            try:
                request = await body_lane_run(work=parse, size=size)
            except WrongRoute as exc:
                raise ApiError(400, "wrong_route", str(exc)) from None
        call.received = received_of(request=request)
        request = await hosted_images_fetched(
            call=call, request=request, limits=limits.images, received=lambda r: received_of(request=r)
        )
        outcome = await evaluation_calibrated(
            call=call, request=request.evaluation, admission=admission, on_answer=on_answer
        )
    assert call.evaluator is not None, "an evaluated call names its evaluator"
    return Served(request_id=request_id, request=request, model=call.evaluator.backend.model, outcome=outcome)

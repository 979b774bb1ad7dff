"""A read body of `POST /v1/classify` answered: validated, evaluated, rendered (what its `WireFormat` serves)."""

from __future__ import annotations

from django.http import HttpResponse

from api.classify.render import classified_render
from api.classify.service import classify_run
from api.plumbing.bodies import Body
from api.plumbing.json_render import json_response
from api.plumbing.metering import phase_timed
from api.plumbing.ratelimits import Admission
from audit.callers import Caller
from calibration.applied import calibrated_header


async def classify_answer(body: Body, request_id: str, caller: Caller | None, admission: Admission) -> HttpResponse:
    classified = await classify_run(body=body, request_id=request_id, caller=caller, admission=admission)
    headers = {"x-typesafe-request-id": request_id, "x-openjev-model": classified.served_model}
    with phase_timed("render"):
        return json_response(
            body=classified_render(classified=classified),
            headers=headers | calibrated_header(answers=classified.outcome.answers),
        )

"""A read body of `POST /v1/systemone` answered: validated, evaluated, rendered (what its `WireFormat` serves)."""

from __future__ import annotations

from django.http import HttpResponse

from api.plumbing.bodies import Body
from api.plumbing.json_render import json_response
from api.plumbing.metering import phase_timed
from api.plumbing.ratelimits import Admission
from api.systemone.render import served_headers, served_render
from api.systemone.service import systemone_evaluate
from audit.callers import Caller


async def systemone_answer(body: Body, request_id: str, caller: Caller | None, admission: Admission) -> HttpResponse:
    served = await systemone_evaluate(body=body, request_id=request_id, caller=caller, admission=admission)
    with phase_timed("render"):
        return json_response(body=served_render(served=served), headers=served_headers(served=served))

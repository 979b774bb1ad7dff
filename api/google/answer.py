"""A read body in Google's Decisions shape answered: validated, evaluated, rendered (what its `WireFormat` serves)."""

from __future__ import annotations

from django.http import HttpResponse

from api.google.render import decided_headers, decided_render
from api.google.service import google_evaluate
from api.plumbing.bodies import Body
from api.plumbing.json_render import json_response
from api.plumbing.metering import phase_timed
from api.plumbing.ratelimits import Admission
from audit.callers import Caller


async def google_answer(body: Body, request_id: str, caller: Caller | None, admission: Admission) -> HttpResponse:
    decided = await google_evaluate(body=body, request_id=request_id, caller=caller, admission=admission)
    with phase_timed("render"):
        return json_response(body=decided_render(decided=decided), headers=decided_headers(decided=decided))

"""A read body of OpenAI's Decisions API answered: validated, evaluated, rendered (what its `WireFormat` serves)."""

from __future__ import annotations

from django.http import HttpResponse

from api.decisions.render import decided_headers, decided_render
from api.decisions.service import decisions_evaluate
from api.plumbing.bodies import Body
from api.plumbing.json_render import json_response
from api.plumbing.metering import phase_timed
from api.plumbing.ratelimits import Admission
from audit.callers import Caller


async def decisions_answer(body: Body, request_id: str, caller: Caller | None, admission: Admission) -> HttpResponse:
    decided = await decisions_evaluate(body=body, request_id=request_id, caller=caller, admission=admission)
    with phase_timed("render"):
        return json_response(body=decided_render(decided=decided), headers=decided_headers(decided=decided))

"""One batch line: its envelope read, its body checked as its route checks it, and answered as its route answers.

A line is `{"custom_id", "method", "url", "body"}`; `url` names an installed wire format's route (`/v1/decisions`
takes OpenAI's and Google's bodies, told apart as the route tells them), and the body goes through that format's
own service: the same validation, scoring, calibration and stored row as the same body sent directly. Only the
HTTP around it is left out, and the caller's per-key limits are waited for instead of refused: a batch runs
within its key's limits at whatever pace they allow.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

import orjson
from django.http import HttpResponse

from api.plumbing.bodies import Body
from api.plumbing.error_responses import RETRIED, exception_response
from api.plumbing.formats import REQUEST_ID_HEADER, WireFormat, route_of_path
from api.plumbing.ratelimits import Admission, request_admitted
from api.plumbing.requestids import request_id_bound
from api.plumbing.validation import Validated, validation_only
from audit.callers import Caller, KeyLimits
from audit.storage.collect import records_collected
from batches.items import ItemAnswer
from inference.errors import value_quoted
from inference.priority import backend_priority_set

CUSTOM_ID_MAX = 512
ATTEMPTS = 6
"""Tries of a line refused for a moment (429 over the key's limits, 529 full, 503 backend starting)."""
WAIT_MAX_SECONDS = 30.0


@dataclass(frozen=True)
class LineRequest:
    number: int
    custom_id: str
    url: str
    body: Any
    size: int


class LineInvalid(Exception):
    """A line that is not a request: the batch fails with it in OpenAI's `errors` list."""

    def __init__(self, *, code: str, message: str, line: int, param: str | None = None) -> None:
        super().__init__(message)
        self.error = {"code": code, "message": message, "param": param, "line": line}


def line_read(*, number: int, text: str, endpoint: str) -> LineRequest:
    """The line's envelope, or LineInvalid naming what is wrong with it."""
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise LineInvalid(code="invalid_json_line", message=f"line {number} is not JSON: {exc}", line=number) from None
    if not isinstance(data, dict):
        raise LineInvalid(code="invalid_json_line", message=f"line {number} is not a JSON object", line=number)
    custom_id = data.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id or len(custom_id) > CUSTOM_ID_MAX:
        raise LineInvalid(
            code="invalid_custom_id",
            message=f"line {number}: custom_id must be a string of 1 to {CUSTOM_ID_MAX} characters",
            line=number,
            param="custom_id",
        )
    if data.get("method", "POST") != "POST":
        raise LineInvalid(code="invalid_method", message=f"line {number}: method must be POST", line=number)
    url = data.get("url")
    if url != endpoint:
        raise LineInvalid(
            code="mismatched_endpoint",
            message=f"line {number}: url {value_quoted(str(url))} is not the batch's endpoint {endpoint}",
            line=number,
            param="url",
        )
    body = data.get("body")
    if not isinstance(body, dict):
        raise LineInvalid(code="invalid_body", message=f"line {number}: body must be a JSON object", line=number)
    return LineRequest(number=number, custom_id=custom_id, url=url, body=body, size=len(text))


def endpoint_format(*, endpoint: str) -> WireFormat | None:
    """The installed format whose route `endpoint` is (its primary: a shared path's others claim their bodies)."""
    route = route_of_path(endpoint)
    return route.primary if route is not None and route.path == endpoint else None


def _format_of(line: LineRequest) -> WireFormat:
    route = route_of_path(line.url)
    assert route is not None, "a line's url was checked against the installed routes"
    return route.format_of(data=line.body)


async def line_checked(*, line: LineRequest, caller: Caller | None) -> HttpResponse | None:
    """None for a body its route would evaluate; else the route's own error response for it."""
    wire_format = _format_of(line)
    request_id = f"{wire_format.request_id_prefix}{uuid.uuid4().hex}"
    with validation_only(), records_collected(), request_id_bound(request_id=request_id):
        try:
            body = Body(data=line.body, size=line.size)
            await wire_format.serve(body, request_id, caller, Admission(subject="", limits=KeyLimits()))
        except Validated:
            return None
        except Exception as exc:
            return _error_response(exc, wire_format=wire_format, request_id=request_id)
    raise AssertionError("a format's service evaluates every valid body")


def _error_response(exc: Exception, *, wire_format: WireFormat, request_id: str) -> HttpResponse:
    response = exception_response(exc, shape=wire_format.shape)
    response[REQUEST_ID_HEADER] = request_id
    return response


async def line_answered(*, item_id: int, line: LineRequest, caller: Caller | None, priority: int | None) -> ItemAnswer:
    """The line answered by its route's service, waiting out a moment's refusal (limits, a full server, a backend
    starting) as a client would; only the last try's evaluation is stored."""
    wire_format = _format_of(line)
    request_id = f"{wire_format.request_id_prefix}{uuid.uuid4().hex}"
    for attempt in range(1, ATTEMPTS + 1):
        with (
            records_collected() as records,
            request_id_bound(request_id=request_id),
            backend_priority_set(priority=priority),
        ):
            response = await _served(line=line, wire_format=wire_format, request_id=request_id, caller=caller)
        if response.status_code not in RETRIED or attempt == ATTEMPTS or _final(response):
            break
        await asyncio.sleep(_wait_of(response=response, attempt=attempt))
    return answer_of(item_id=item_id, response=response, request_id=request_id, records=tuple(records))


async def _served(
    *, line: LineRequest, wire_format: WireFormat, request_id: str, caller: Caller | None
) -> HttpResponse:
    try:
        async with request_admitted(caller=caller, address=None) as admission:
            return await wire_format.serve(Body(data=line.body, size=line.size), request_id, caller, admission)
    except Exception as exc:
        return _error_response(exc, wire_format=wire_format, request_id=request_id)


def _final(response: HttpResponse) -> bool:
    """A refusal that waiting cannot cure (a paused key, a request larger than the whole limit)."""
    return response.get("x-should-retry") == "false"


def _wait_of(*, response: HttpResponse, attempt: int) -> float:
    hinted = response.get("retry-after-ms")
    if hinted is not None and hinted.isdigit():
        return min(int(hinted) / 1000.0, WAIT_MAX_SECONDS)
    hinted = response.get("retry-after")
    if hinted is not None and hinted.isdigit():
        return min(float(hinted), WAIT_MAX_SECONDS)
    return min(0.5 * 2**attempt, WAIT_MAX_SECONDS)


def answer_of(*, item_id: int, response: HttpResponse, request_id: str, records: tuple[Any, ...]) -> ItemAnswer:
    outcomes = [r.outcome for r in records if r.outcome is not None]
    return ItemAnswer(
        item_id=item_id,
        status_code=response.status_code,
        request_id=request_id,
        response=response.content.decode(),
        records=records,
        input_tokens=sum(o.usage.input_tokens for o in outcomes),
        cached_tokens=sum(o.cached_tokens or 0 for o in outcomes),
        output_tokens=sum(o.usage.output_tokens for o in outcomes),
    )

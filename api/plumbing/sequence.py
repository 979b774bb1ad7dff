"""One evaluation as every single-evaluation format's service runs it: parse (in the body lane when large), record
what was asked, fetch hosted images, evaluate and calibrate under the caller's admission, record however it ends. A
format supplies only what differs (`Hooks`): how its problems become its errors, which parse failures are answers of
their own, and what the audit stores of its request."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from api.checking.images import ImageLimits
from api.checking.limits import ModelUnknown
from api.plumbing.api_error import ApiError
from api.plumbing.bodies import Body, request_parsed
from api.plumbing.evaluate import HostingRequest, evaluation_calibrated, hosted_images_fetched
from api.plumbing.formats import FormatCheck
from api.plumbing.ratelimits import Admission
from api.plumbing.recording import evaluation_recorded
from audit.callers import Caller
from audit.storage.records import Received
from inference.errors import value_quoted
from inference.runner import Outcome
from inference.streaming import AnswerSink


def _no_problems(request: object) -> AbstractContextManager[None]:
    return contextlib.nullcontext()


def _none_refused(error: Exception) -> ApiError | None:
    return None


def model_unknown_answered(*, message: Callable[[str], str]) -> Callable[[Exception], ApiError | None]:
    """`Hooks.refused` for a format whose clients expect a 404 `model_not_found` (at `param` `model`) for a model
    this server does not serve (`ModelUnknown`); `message` words it from the model's name, quoted."""

    def refused(error: Exception) -> ApiError | None:
        if not isinstance(error, ModelUnknown):
            return None
        return ApiError(404, "model_not_found", message(value_quoted(str(error))), param="model")

    return refused


@dataclass(frozen=True, kw_only=True)
class Hooks[Parsed: HostingRequest]:
    """What a format does its own way in the shared sequence."""

    check: FormatCheck
    """Its parse and what the audit stores of a body it could not parse."""
    received: Callable[[Parsed], Received]
    """What the audit stores of its parsed request."""
    images: ImageLimits
    """The limits its hosted images are fetched under."""
    problems: Callable[[Parsed | None], AbstractContextManager[None]] = _no_problems
    """Around the parse (None) and around the evaluation (the request): turns the core's `RequestInvalid` into the
    format's own error."""
    refused: Callable[[Exception], ApiError | None] = _none_refused
    """The format's answer to a parse failure that is not a problem list (a model not served, a wrong route), or
    None to let it pass as it is."""


@dataclass(frozen=True)
class Sequenced[Parsed]:
    request: Parsed
    model: str
    """The model the backend served (not the name the request used)."""
    outcome: Outcome


async def evaluation_sequenced[Parsed: HostingRequest](
    *,
    body: Body,
    hooks: Hooks[Parsed],
    request_id: str,
    caller: Caller | None,
    admission: Admission | None = None,
    on_answer: AnswerSink | None = None,
) -> Sequenced[Parsed]:
    """The body parsed (or its parse taken, where the view ran it), evaluated and calibrated, recorded however it
    ends; the errors as `hooks` make them; `on_answer` gets each answer as soon as it is scored (the stream)."""
    check = hooks.check
    async with evaluation_recorded(
        request_id=request_id, caller=caller, unparsed=lambda: check.unparsed(data=body.data)
    ) as call:
        try:
            with hooks.problems(None):
                request: Parsed = await request_parsed(body=body, check=check)
        except Exception as exc:
            answer = hooks.refused(exc)
            if answer is None:
                raise
            raise answer from None
        call.received = hooks.received(request)
        with hooks.problems(request):
            request = await hosted_images_fetched(
                call=call, request=request, limits=hooks.images, received=hooks.received
            )
            outcome = await evaluation_calibrated(
                call=call, request=request.evaluation, admission=admission, on_answer=on_answer
            )
    assert call.evaluator is not None, "an evaluated call names its evaluator"
    return Sequenced(request=request, model=call.evaluator.backend.model, outcome=outcome)

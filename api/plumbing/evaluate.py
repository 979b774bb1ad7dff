"""Evaluations on the process's evaluator, with the caller's tokens reserved and the active calibrations applied:
what every wire format (System One and its stream, OpenAI's and Google's Decisions shapes, classify's several
evaluations at once) runs inside its recorded block, so the same question gets the same answer whichever format
asked it."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar, Protocol

from django.conf import settings

from api.checking.image_fetch import request_images_fetched
from api.checking.images import ImageLimits
from api.checking.json_body import Loc
from api.plumbing.metering import phase_timed
from api.plumbing.ratelimits import Admission
from api.plumbing.recording import Recording
from api.plumbing.validation import evaluation_starts
from audit.storage.records import Received
from calibration.applied import Calibrating, answer_calibrated, calibrating_get, outcome_calibrated
from inference.batch import evaluations_run, outcomes_merge
from inference.images import Image
from inference.requests import EvaluationRequest
from inference.runner import Evaluator, Outcome, TokensReserve, evaluation_run
from inference.streaming import AnswerSink
from serving.evaluator import evaluator_get, evaluator_ready


class HostingRequest(Protocol):
    """A format's parsed request: a dataclass with the core's request and its hosted images (where each stands)."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    @property
    def evaluation(self) -> EvaluationRequest: ...
    @property
    def hosted(self) -> tuple[tuple[Image, Loc], ...]: ...


async def hosted_images_fetched[Parsed: HostingRequest](
    *, call: Recording, request: Parsed, limits: ImageLimits, received: Callable[[Parsed], Received]
) -> Parsed:
    """`request` with its hosted image URLs fetched (`request_images_fetched`), and `call` storing the request as
    the model then reads it (`received`); one with no hosted image is returned as it is, fetching nothing."""
    evaluation_starts()
    if not request.hosted:
        return request
    with phase_timed("fetch"):
        evaluation = await request_images_fetched(evaluation=request.evaluation, hosted=request.hosted, limits=limits)
    request = dataclasses.replace(request, evaluation=evaluation)
    call.received = received(request)
    return request


async def evaluation_calibrated(
    *,
    call: Recording,
    request: EvaluationRequest,
    admission: Admission | None = None,
    on_answer: AnswerSink | None = None,
) -> Outcome:
    """Evaluate (Overloaded, BackendUnavailable, BackendFailed, EvaluationTimeout, RequestInvalid for what only
    the core can check; a 429 when the `admission`'s key cannot take the prompt tokens), calibrate, and note the
    evaluator and the outcome on `call` for storage; `on_answer` gets each answer, calibrated too, as soon as it
    is scored (the stream)."""
    calibrating = await calibrating_get(caller=call.caller)
    sink = (
        on_answer
        if on_answer is None or not calibrating.calibrators
        else (lambda answer: on_answer(answer_calibrated(answer=answer, calibrating=calibrating)))
    )

    async def run(evaluator: Evaluator, reserve: TokensReserve | None) -> Outcome:
        return await evaluation_run(evaluator=evaluator, request=request, on_answer=sink, reserve=reserve)

    return await _calibrated(call=call, admission=admission, calibrating=calibrating, run=run)


async def evaluations_calibrated(
    *, call: Recording, requests: Sequence[EvaluationRequest], classifier: str, admission: Admission | None = None
) -> Outcome:
    """Several evaluations under one admission, as one outcome (`POST /v1/classify`: one per input text), with
    the failures of `evaluation_calibrated` and the `classifier`'s calibration applied to every answer."""
    calibrating = await calibrating_get(caller=call.caller, classifier=classifier)

    async def run(evaluator: Evaluator, reserve: TokensReserve | None) -> Outcome:
        return outcomes_merge(outcomes=await evaluations_run(evaluator=evaluator, requests=requests, reserve=reserve))

    return await _calibrated(call=call, admission=admission, calibrating=calibrating, run=run)


async def _calibrated(
    *,
    call: Recording,
    admission: Admission | None,
    calibrating: Calibrating,
    run: Callable[[Evaluator, TokensReserve | None], Awaitable[Outcome]],
) -> Outcome:
    """What every evaluation does around the core's run: the process's evaluator noted for storage, the prompt
    tokens reserved under the caller's admission and settled, the calibrations applied, the outcome noted."""
    evaluation_starts()
    call.evaluator = evaluator = await evaluator_get()
    reserve = admission.tokens_reserve if admission is not None and admission.reserves_tokens else None
    outcome = await run(evaluator, reserve)
    if admission is not None:
        admission.tokens_used(outcome.usage.input_tokens)
    call.outcome = outcome = outcome_calibrated(outcome=outcome, calibrating=calibrating)
    return outcome


def images_accepted() -> int:
    """`OPENJEV_MAX_IMAGES`, or 0 once the evaluator is known to be unable to see (`images_not_supported`)."""
    evaluator = evaluator_ready()
    return 0 if evaluator is not None and evaluator.vision is None else settings.OPENJEV.max_images

"""One evaluation on the process's evaluator, with the active calibrations applied: what every wire
format (`POST /v1/systemone`, its stream, `POST /v1/decisions`) runs inside its recorded block, so the
same question gets the same answer whichever format asked it."""

from __future__ import annotations

from django.conf import settings

from api.plumbing.ratelimits import Admission
from api.plumbing.recording import Recording
from calibration.applied import answer_calibrated, calibrating_get, outcome_calibrated
from inference.requests import EvaluationRequest
from inference.runner import Outcome, evaluation_run
from inference.streaming import AnswerSink
from serving.evaluator import evaluator_get, evaluator_ready


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
    call.evaluator = evaluator = await evaluator_get()
    calibrating = await calibrating_get(caller=call.caller)
    sink = (
        on_answer
        if on_answer is None or not calibrating.calibrators
        else (lambda answer: on_answer(answer_calibrated(answer=answer, calibrating=calibrating)))
    )
    reserve = admission.tokens_reserve if admission is not None and admission.reserves_tokens else None
    outcome = await evaluation_run(evaluator=evaluator, request=request, on_answer=sink, reserve=reserve)
    if admission is not None:
        admission.tokens_used(outcome.usage.input_tokens)
    call.outcome = outcome = outcome_calibrated(outcome=outcome, calibrating=calibrating)
    return outcome


def images_accepted() -> int:
    """`OPENJEV_MAX_IMAGES`, or 0 once the evaluator is known to be unable to see (`images_not_supported`)."""
    evaluator = evaluator_ready()
    return 0 if evaluator is not None and evaluator.vision is None else settings.OPENJEV.max_images

"""`POST /v1/feedback`: the true label of one stored answer, so accuracy can be measured and
calibrations fitted from real traffic.

Idempotent per (request, question): sending a label again replaces it, so a client may retry freely
or correct a mistake. With auth on, a caller labels only the evaluations made with its own key;
another key's evaluation reads as unknown (404), so ids cannot be probed. Answers are stored by the
writer thread shortly after the response, so a label sent at once may find no answer yet (404: retry).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connections
from django.http import HttpResponse
from django.utils import timezone
from rest_framework.request import Request

from api.openapi.feedback import feedback_schema
from api.plumbing.api_error import ApiError
from api.plumbing.bodies import Body
from api.plumbing.formats import REQUEST_ID_HEADER
from api.plumbing.json_render import json_response
from api.plumbing.ratelimits import Admission
from api.views import ApiView
from audit.callers import Caller
from audit.models import EvaluationAnswer
from calibration.labelled import label_key_of, label_rule
from inference.errors import Problem, RequestInvalid, value_quoted

log = logging.getLogger(__name__)

REQUEST_ID_MAX = 64
QUESTION_ID_MAX = 500
"""The longest ids stored (`Evaluation.request_id`, `EvaluationAnswer.question_id`): a longer one names no
answer, and is refused before it is looked up or echoed."""


@dataclass(frozen=True)
class Feedback:
    request_id: str
    question_id: str | int
    """A System One question id or a Decisions question's name; an integer: the question's position in the
    request (a Decisions question without a name)."""
    label: Any
    """As sent; checked against the question's options once the answer is found."""


@dataclass(frozen=True)
class Labelled:
    request_id: str
    question_id: str
    label: str
    """The option key stored (a noul's `true`/`false`, a score's level index as text)."""
    labelled_at: datetime


def feedback_parse(*, data: Any) -> Feedback:
    """The body's three fields, or a 422 listing every problem."""
    if not isinstance(data, dict):
        raise RequestInvalid([Problem((), "the body must be a JSON object", "object_type")])
    problems = []
    request_id, question_id = data.get("request_id"), data.get("question_id")
    if not isinstance(request_id, str) or not request_id:
        problems.append(Problem(("request_id",), "a non-empty string is required", "string_type"))
    elif len(request_id) > REQUEST_ID_MAX:
        problems.append(
            Problem(("request_id",), f"a request id has at most {REQUEST_ID_MAX} characters", "string_too_long")
        )
    if isinstance(question_id, bool) or not isinstance(question_id, str | int) or question_id in ("", None):
        problems.append(
            Problem(("question_id",), "a non-empty string (or a question's index) is required", "string_type")
        )
    elif isinstance(question_id, int) and not 0 <= question_id < 1 << 15:
        problems.append(Problem(("question_id",), "a question's index is from 0 to 32767", "index_range"))
    elif isinstance(question_id, str) and len(question_id) > QUESTION_ID_MAX:
        problems.append(
            Problem(("question_id",), f"a question id has at most {QUESTION_ID_MAX} characters", "string_too_long")
        )
    if "label" not in data or data["label"] is None:
        problems.append(Problem(("label",), "the true option is required", "missing"))
    problems += [
        Problem((name,), "unknown field", "extra_forbidden")
        for name in data
        if name not in ("request_id", "question_id", "label")
    ]
    if problems:
        raise RequestInvalid(problems)
    return Feedback(request_id=data["request_id"], question_id=data["question_id"], label=data["label"])


def answer_find(*, feedback: Feedback, caller: Caller | None) -> EvaluationAnswer | None:
    """The stored answer the feedback is about, among the caller's own evaluations when auth is on."""
    answers = EvaluationAnswer.objects.filter(evaluation__request_id=feedback.request_id)
    answers = (
        answers.filter(position=feedback.question_id)
        if isinstance(feedback.question_id, int)
        else answers.filter(question_id=feedback.question_id)
    )
    if caller is not None:
        answers = answers.filter(evaluation__api_key_label=caller.label)
    return answers.first()


def _label_store(feedback: Feedback, caller: Caller | None) -> Labelled:
    """Find the caller's answer and store the label; a database that cannot be used is a retryable 503."""
    try:
        answer = answer_find(feedback=feedback, caller=caller)
        if answer is None:
            raise ApiError(
                404,
                "not_found",
                f"no stored answer to question {value_quoted(feedback.question_id)} "
                f"of request {value_quoted(feedback.request_id)}",
            )
        key = label_key_of(label=feedback.label, option_keys=answer.option_keys)
        if key is None:
            rule = label_rule(question_type=answer.type, option_keys=answer.option_keys)
            raise RequestInvalid([Problem(("label",), f"not an option of this question; use {rule}", "label_invalid")])
        answer.label, answer.labelled_at = key, timezone.now()
        answer.save(update_fields=["label", "labelled_at"])
        return Labelled(
            request_id=feedback.request_id, question_id=answer.question_id, label=key, labelled_at=answer.labelled_at
        )
    except (ApiError, RequestInvalid):
        raise
    except Exception:
        log.exception("could not store a label for %s", feedback.request_id)
        raise ApiError(
            503, "service_unavailable", "labels cannot be stored right now; retry shortly", {"Retry-After": "5"}
        ) from None
    finally:
        connections.close_all()


async def feedback_record(*, data: Any, caller: Caller | None) -> Labelled:
    """Validate (422), find the caller's stored answer (404), check the label against its options (422), store."""
    feedback = feedback_parse(data=data)
    return await sync_to_async(_label_store, thread_sensitive=False)(feedback, caller)


async def _feedback_answer(body: Body, request_id: str, caller: Caller | None, admission: Admission) -> HttpResponse:
    labelled = await feedback_record(data=body.data, caller=caller)
    return json_response(
        body={
            "request_id": labelled.request_id,
            "question_id": labelled.question_id,
            "label": labelled.label,
            "labelled_at": labelled.labelled_at.isoformat(),
        },
        headers={REQUEST_ID_HEADER: request_id},
    )


class FeedbackView(ApiView):
    @feedback_schema
    async def post(self, request: Request) -> HttpResponse:
        return await self._served(request, path=request.path, serve=_feedback_answer)

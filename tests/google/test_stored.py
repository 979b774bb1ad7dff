"""Calls in Google's Decisions shape as stored: under their own API, the input and the questions as sent, the
answers under the caller's ids, a refused call with the status the client got, and a calibration shared with
System One's same question."""

from __future__ import annotations

from dataclasses import replace

import pytest

from api.google.openapi import GOOGLE_REQUEST
from audit.models import Evaluation, EvaluationAnswer
from tests.conftest import README_REQUEST
from tests.database import db
from tests.stored import drained

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def stored(request_id: str) -> tuple[Evaluation, list[EvaluationAnswer]]:
    evaluation = Evaluation.objects.get(request_id=request_id)
    return evaluation, list(evaluation.answers.order_by("position"))


async def test_a_google_call_is_stored_under_its_own_api_with_the_body_as_sent(api, fake, store):
    response = await api.post("/v1/decisions", json=GOOGLE_REQUEST)
    assert response.status_code == 200, response.text
    await drained()
    evaluation, answers = await db(lambda: stored(response.headers["x-typesafe-request-id"]))
    assert (evaluation.api, evaluation.status_code, evaluation.requested_model) == ("google", 200, "models/jev-latest")
    assert evaluation.state == GOOGLE_REQUEST["input"] and evaluation.questions == GOOGLE_REQUEST["questions"]
    assert [a.question_id for a in answers] == ["refund", "team", "anger"]
    assert [a.type for a in answers] == ["noul", "choice", "score"]


async def test_a_refused_google_call_is_stored_with_the_400_the_client_got(api, fake, store):
    response = await api.post("/v1/decisions", json={**GOOGLE_REQUEST, "input": ""})
    assert response.status_code == 400
    await drained()
    evaluation, _ = await db(lambda: stored(response.headers["x-typesafe-request-id"]))
    assert (evaluation.api, evaluation.status_code, evaluation.error_type) == ("google", 400, "empty_input")


async def test_a_calibration_fitted_on_system_one_applies_to_the_same_question_in_googles_shape(
    api, fake, store, settings
):
    from audit.models import Calibration
    from calibration.applied import calibration_cache_forget

    settings.OPENJEV = replace(settings.OPENJEV, calibration=True)
    first = await api.post("/v1/systemone", json=README_REQUEST)
    await drained()
    _, answers = await db(lambda: stored(first.headers["x-typesafe-request-id"]))
    team = answers[1]

    def activate() -> None:
        Calibration.objects.create(
            key=team.question_key,
            subject="team",
            question_type="choice",
            option_keys=team.option_keys,
            method="temperature",
            temperature=4.0,
            biases=None,
            report={},
            active=True,
        )

    await db(activate)
    calibration_cache_forget()
    systemone = await api.post("/v1/systemone", json=README_REQUEST)
    google = await api.post("/v1/decisions", json=GOOGLE_REQUEST)
    assert systemone.headers["x-openjev-calibrated"] == "team" == google.headers["x-openjev-calibrated"]
    assert google.json()["answers"]["team"]["probabilities"] == systemone.json()["answers"]["team"]["probabilities"]

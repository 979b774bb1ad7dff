"""POST /v1/feedback: labels on stored answers, idempotent, checked against the question's options."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import httpx
import pytest

from audit.models import Evaluation, EvaluationAnswer
from tests.conftest import README_REQUEST
from tests.database import db
from tests.stored import drained

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


async def answered(api: httpx.AsyncClient) -> str:
    response = await api.post("/v1/systemone", json=README_REQUEST)
    assert response.status_code == 200
    await drained()
    return response.headers["x-typesafe-request-id"]


def labels_of(request_id: str) -> dict[str, str | None]:
    return dict(EvaluationAnswer.objects.filter(evaluation__request_id=request_id).values_list("question_id", "label"))


async def feedback(api: httpx.AsyncClient, **body: Any) -> httpx.Response:
    return await api.post("/v1/feedback", json=body)


async def test_feedback_labels_each_question_type_with_its_option_key(api, fake, store):
    rid = await answered(api)
    choice = await feedback(api, request_id=rid, question_id="team", label="Billing")
    noul = await feedback(api, request_id=rid, question_id="refund", label=True)
    score = await feedback(api, request_id=rid, question_id="anger", label=2)

    assert [r.status_code for r in (choice, noul, score)] == [200, 200, 200]
    assert choice.json()["label"] == "Billing" and noul.json()["label"] == "true" and score.json()["label"] == "2"
    assert choice.json()["request_id"] == rid and "labelled_at" in choice.json()
    assert await db(lambda: labels_of(rid)) == {"team": "Billing", "refund": "true", "anger": "2"}


async def test_feedback_sent_again_replaces_the_label(api, fake, store):
    rid = await answered(api)
    first = await feedback(api, request_id=rid, question_id="team", label="Sales")
    again = await feedback(api, request_id=rid, question_id="team", label="Sales")
    corrected = await feedback(api, request_id=rid, question_id="team", label="Technical")

    assert first.json()["label"] == again.json()["label"] == "Sales"
    assert corrected.status_code == 200
    assert (await db(lambda: labels_of(rid)))["team"] == "Technical"


async def test_feedback_for_an_unknown_request_or_question_is_404(api, fake, store):
    rid = await answered(api)
    unknown_request = await feedback(api, request_id="req_nope", question_id="team", label="Sales")
    unknown_question = await feedback(api, request_id=rid, question_id="nope", label="Sales")

    assert unknown_request.status_code == unknown_question.status_code == 404
    assert unknown_request.json()["detail"]["error_type"] == "not_found"


async def test_a_label_that_is_not_an_option_is_422_and_says_what_would_be(api, fake, store):
    rid = await answered(api)
    wrong_key = await feedback(api, request_id=rid, question_id="team", label="Marketing")
    wrong_level = await feedback(api, request_id=rid, question_id="anger", label=3)
    wrong_noul = await feedback(api, request_id=rid, question_id="refund", label="yes")

    assert [r.status_code for r in (wrong_key, wrong_level, wrong_noul)] == [422, 422, 422]
    problem = wrong_key.json()["detail"][0]
    assert problem["loc"] == ["body", "label"] and problem["type"] == "label_invalid"
    assert "'Billing', 'Technical', 'Sales'" in problem["msg"]
    assert "0 to 2" in wrong_level.json()["detail"][0]["msg"]
    assert await db(lambda: labels_of(rid)) == {"team": None, "refund": None, "anger": None}


async def test_a_body_missing_fields_is_422_listing_each(api, fake, store):
    response = await api.post("/v1/feedback", json={"request_id": "", "extra": 1})

    assert response.status_code == 422
    assert {tuple(p["loc"]) for p in response.json()["detail"]} == {
        ("body", "request_id"),
        ("body", "question_id"),
        ("body", "label"),
        ("body", "extra"),
    }


async def test_with_auth_on_another_keys_evaluation_reads_as_unknown(api, fake, store, settings):
    rid = await answered(api)
    await db(lambda: Evaluation.objects.filter(request_id=rid).update(api_key_label="oj_other"))
    settings.OPENJEV = replace(settings.OPENJEV, api_key="secret-env-key")
    headers = {"Authorization": "Bearer secret-env-key"}
    response = await api.post(
        "/v1/feedback", json={"request_id": rid, "question_id": "team", "label": "Sales"}, headers=headers
    )

    assert response.status_code == 404

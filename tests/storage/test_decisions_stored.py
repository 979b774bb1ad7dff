"""`POST /v1/decisions` calls as stored: which API, the end-user id, refusals with their numbers, labels by a
question's name or index in the answer's own JSON type, calibrations shared with System One, the admin."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import httpx
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from api.decisions.openapi_examples import DECISIONS_REQUEST
from audit.models import Evaluation, EvaluationAnswer
from tests.conftest import README_REQUEST
from tests.database import db
from tests.stored import drained

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

CHOICES = [{"value": "true"}, {"value": True}, {"value": False}]
BODY: dict[str, Any] = {
    **DECISIONS_REQUEST,
    "safety_identifier": "user-4711",
    "prompt_cache_key": "tenant-a",
    "questions": [
        *DECISIONS_REQUEST["questions"],
        {"type": "choice", "instructions": "Which is it?", "choices": CHOICES},
    ],
}


async def decided(api: httpx.AsyncClient, body: dict[str, Any] = BODY) -> str:
    response = await api.post("/v1/decisions", json=body)
    assert response.status_code == 200, response.text
    await drained()
    return response.headers["x-request-id"]


def stored(request_id: str) -> tuple[Evaluation, list[EvaluationAnswer]]:
    evaluation = Evaluation.objects.get(request_id=request_id)
    return evaluation, list(evaluation.answers.order_by("position"))


async def test_a_decision_is_stored_with_its_api_end_user_and_question_names(api, fake, store):
    request_id = await decided(api)
    evaluation, answers = await db(lambda: stored(request_id))
    assert (evaluation.api, evaluation.safety_identifier, evaluation.prompt_cache_key) == (
        "decisions",
        "user-4711",
        "tenant-a",
    )
    assert evaluation.questions == BODY["questions"] and evaluation.state == BODY["input"]
    assert [a.question_id for a in answers] == ["refund", "team", "anger", "3"]
    assert [a.type for a in answers] == ["noul", "choice", "score", "choice"]
    assert answers[3].option_keys == ["true", "true (boolean)", "false"]
    assert not any(a.refused for a in answers)


async def test_refusals_are_stored_with_the_numbers_the_model_gave(api, fake, store, settings):
    settings.OPENJEV = replace(settings.OPENJEV, refusal_label_mass=0.1)
    response = await api.post("/v1/decisions", json=BODY)
    await drained()
    sent = [a["type"] for a in response.json()["answers"]]
    _, answers = await db(lambda: stored(response.headers["x-request-id"]))
    assert [a.refused for a in answers] == [kind == "refusal" for kind in sent] and any(a.refused for a in answers)
    for answer in answers:
        assert answer.label_mass is not None and answer.refused == (answer.label_mass < 0.1)
        assert sum(answer.probabilities.values()) == pytest.approx(1)


async def test_feedback_finds_a_decision_by_name_or_index_and_reads_labels_in_their_json_type(api, fake, store):
    request_id = await decided(api)

    async def label(question: str | int, value: Any) -> httpx.Response:
        return await api.post("/v1/feedback", json={"request_id": request_id, "question_id": question, "label": value})

    assert (await label("refund", True)).json()["label"] == "true"
    assert (await label("team", "Sales")).json()["label"] == "Sales"
    assert (await label(2, 1)).json() | {"labelled_at": None} == {
        "request_id": request_id,
        "question_id": "anger",
        "label": "1",
        "labelled_at": None,
    }
    assert (await label(3, True)).json()["label"] == "true (boolean)"
    assert (await label(3, "true")).json()["label"] == "true"
    assert (await label(3, "maybe")).status_code == 422
    assert (await label(9, True)).status_code == 404
    _, answers = await db(lambda: stored(request_id))
    assert [a.label for a in answers] == ["true", "Sales", "1", "true"]


async def test_feedback_refuses_an_overlong_request_id_without_echoing_it(api, fake, store):
    response = await api.post("/v1/feedback", json={"request_id": "r" * 100_000, "question_id": "x", "label": 1})
    assert response.status_code == 422 and len(response.content) < 1000


async def test_a_calibration_fitted_on_one_route_applies_to_the_same_question_on_the_other(api, fake, store, settings):
    from audit.models import Calibration
    from calibration.applied import calibration_cache_forget

    settings.OPENJEV = replace(settings.OPENJEV, calibration=True)
    request_id = await decided(api)
    _, answers = await db(lambda: stored(request_id))
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
    decision = await api.post("/v1/decisions", json=DECISIONS_REQUEST)
    assert systemone.headers["x-openjev-calibrated"] == "team" == decision.headers["x-openjev-calibrated"]
    assert [p["probability"] for p in decision.json()["answers"][1]["probabilities"]] == list(
        systemone.json()["answers"]["team"]["probabilities"].values()
    )


async def test_the_admin_filters_evaluations_by_api_and_shows_the_end_user(api, fake, store, admin_client):
    decision_id = await decided(api)
    systemone = await api.post("/v1/systemone", json=README_REQUEST)
    await drained()
    listing = await db(lambda: admin_client.get("/admin/evaluations/evaluation/?api__exact=decisions"))
    assert listing.status_code == 200
    assert (
        decision_id in listing.content.decode()
        and systemone.headers["x-typesafe-request-id"] not in listing.content.decode()
    )
    pk = await db(lambda: Evaluation.objects.get(request_id=decision_id).pk)
    page = (await db(lambda: admin_client.get(f"/admin/evaluations/evaluation/{pk}/change/"))).content.decode()
    assert "user-4711" in page and "Payments, invoices, refunds" in page
    dashboard = await db(lambda: admin_client.get("/admin/evaluations/evaluation/dashboard/"))
    assert dashboard.status_code == 200 and "refusals" in dashboard.content.decode()


def test_existing_classify_rows_are_marked_as_such_by_the_migration():
    executor = MigrationExecutor(connection)
    executor.migrate([("evaluations", "0006_answer_indexes_lean")])
    old = executor.loader.project_state([("evaluations", "0006_answer_indexes_lean")]).apps
    Old = old.get_model("evaluations", "Evaluation")
    common = {"created_at": "2026-01-01T00:00:00Z", "status_code": 200, "store_level": "full"}
    Old.objects.create(request_id="old-systemone", **common)
    Old.objects.create(request_id="old-classify", classifier_name="sentiment", **common)
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert dict(Evaluation.objects.values_list("request_id", "api")) == {
        "old-systemone": "systemone",
        "old-classify": "classify",
    }


async def test_answers_keep_their_option_texts_and_instructions_as_the_model_read_them(api, fake, store):
    """The audit shows each option's text from the answer itself, whichever wire format asked: nothing re-reads
    a format's JSON. At level `metadata` no text is kept."""
    request_id = await decided(api)
    _, answers = await db(lambda: stored(request_id))
    team = answers[1]
    assert team.instructions == "Which team should handle this ticket?"
    assert team.option_texts == ["Payments, invoices, refunds", "Bugs, outages", "Pricing, upgrades"]
    assert answers[3].option_texts == ["true", "true (boolean)", "false"]  # read as their keys
    store("metadata")
    request_id = await decided(api)
    _, answers = await db(lambda: stored(request_id))
    assert all(a.option_texts is None and a.instructions == "" for a in answers)

"""Each route family answers in its own clients' shape, a 404 for what it does not serve included: OpenAI's SDK's
`models.retrieve` reads OpenAI's error for an unknown model, Google's clients Google's for any path under
`/v1beta/`, and every other path of the API the plain `detail` shape; and every route takes empty instructions,
which System One answers as the question type's own (pydantic-ai sends `""`)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from openai import NotFoundError, OpenAI

from api.decisions.openapi_examples import DECISIONS_REQUEST
from api.google.openapi import GOOGLE_REQUEST
from tests.conftest import README_REQUEST


async def test_an_unknown_model_on_the_openai_family_is_a_404_in_openais_shape(api):
    response = await api.get("/v1/models/gpt-nothing")
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "not_found"
    assert "gpt-nothing" in error["message"] and response.headers["x-typesafe-request-id"]


def test_openais_sdk_raises_its_own_not_found_for_an_unknown_model(asgi_server):
    client = OpenAI(base_url=f"{asgi_server.url}/v1", api_key="unused", max_retries=0)
    assert client.models.retrieve("jev-latest").id == "jev-latest"
    with pytest.raises(NotFoundError) as raised:
        client.models.retrieve("gpt-nothing")
    assert raised.value.status_code == 404 and raised.value.code == "not_found"


@pytest.mark.parametrize(
    ("path", "shape"),
    [("/v1/nowhere", "detail"), ("/v1/models", None), ("/v1beta/nowhere", "google"), ("/v1/models/x/y", "openai")],
)
async def test_each_family_answers_its_404_in_its_own_shape(api, path, shape):
    response = await api.get(path)
    if shape is None:  # the list itself is served
        assert response.status_code == 200
        return
    assert response.status_code == 404 and response.headers["x-typesafe-request-id"]
    body = response.json()
    if shape == "detail":
        assert body["detail"]["error_type"] == "not_found"
    elif shape == "google":
        assert body["error"]["status"] == "NOT_FOUND"
    else:
        assert body["error"]["type"] == "invalid_request_error"


def emptied(body: dict[str, Any], questions_key: str = "questions") -> dict[str, Any]:
    """`body` with every question's instructions empty."""
    changed = copy.deepcopy(body)
    questions = changed[questions_key]
    for question in questions.values() if isinstance(questions, dict) else questions:
        question["instructions"] = ""
    return changed


async def test_empty_instructions_are_taken_on_every_route_and_answered_as_system_one_answers_them(api, fake):
    systemone = await api.post("/v1/systemone", json=emptied(README_REQUEST))
    assert systemone.status_code == 200, systemone.text
    expected = systemone.json()["answers"]
    decisions = await api.post("/v1/decisions", json=emptied(DECISIONS_REQUEST))
    assert decisions.status_code == 200, decisions.text
    refund, team, _score = decisions.json()["answers"]
    assert refund["probability"] == expected["refund"]["noul"]
    assert [c["probability"] for c in team["probabilities"]] == list(expected["team"]["probabilities"].values())
    for path in ("/v1/decisions", "/v1beta/decisions"):
        google = await api.post(path, json=emptied(GOOGLE_REQUEST))
        assert google.status_code == 200, google.text
        answers = google.json()["answers"]
        assert answers["team"]["probabilities"] == expected["team"]["probabilities"]
        assert answers["anger"]["probabilities"] == expected["anger"]["probabilities"]

"""Google's Decisions shape on `POST /v1beta/decisions`, the path Google's clients post to by default (pydantic-ai's
`google-decisions:`, `@ai-sdk/google`, google-genai with the `v1beta` API version): the same answers as on
`/v1/decisions`, every error in Google's shape, and every other path under `/v1beta/` a 404 in Google's shape with
the request id (in the header and in the error's `RequestInfo`). google-genai (pinned, unchanged) against the real
server on a socket."""

from __future__ import annotations

from typing import Any

import pytest
from google import genai
from google.genai import _interactions as gerrors

from api.decisions.openapi_examples import DECISIONS_REQUEST
from api.google.openapi import GOOGLE_REQUEST
from tests.google.test_sdk import _system_one, assert_system_ones_probabilities

V1BETA = "/v1beta/decisions"
REQUEST_INFO = "type.googleapis.com/google.rpc.RequestInfo"


def v1beta_client(url: str) -> genai.Client:
    """The client as its documentation builds one for another endpoint, on the `v1beta` API version."""
    return genai.Client(api_key="unused-while-auth-is-off", http_options={"base_url": url, "api_version": "v1beta"})


def request_id_of(error: dict[str, Any]) -> str:
    (request_id,) = [d["requestId"] for d in error["details"] if d["@type"] == REQUEST_INFO]
    return str(request_id)


def test_google_genai_on_v1beta_gets_system_ones_probabilities(google_server, fake):
    server, recorder = google_server
    client = v1beta_client(server.url)  # held: the SDK closes its connection with it
    decision = client.decisions.create(**GOOGLE_REQUEST)
    assert_system_ones_probabilities(decision, _system_one(server.url))
    (sent,) = recorder.to(V1BETA)
    assert sent.status == 200 and sent.headers["x-goog-api-key"]


def test_an_invalid_request_on_v1beta_is_a_400_in_googles_shape_with_its_request_id(google_server, fake):
    server, recorder = google_server
    client = v1beta_client(server.url)
    with pytest.raises(gerrors.BadRequestError) as raised:
        client.decisions.create(**{**GOOGLE_REQUEST, "questions": {}})
    error = raised.value.body["error"]  # type: ignore[index]
    assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
    assert request_id_of(error) == raised.value.response.headers["x-typesafe-request-id"]
    with pytest.raises(gerrors.NotFoundError):
        client.decisions.create(**{**GOOGLE_REQUEST, "model": "models/gemini-decision-1"})
    assert [r.status for r in recorder.to(V1BETA)] == [400, 404]
    assert fake.generate_calls == 0


async def test_an_openai_body_on_v1beta_is_read_as_googles_and_refused_in_its_shape(api, fake):
    """The path has one format: a body in OpenAI's shape is read as Google's, and told what is wrong with it."""
    response = await api.post(V1BETA, json=DECISIONS_REQUEST)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT" and "questions" in error["message"]
    assert fake.generate_calls == 0


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/v1beta/models/jev-latest"), ("POST", "/v1beta/models/jev-latest:generateContent"), ("GET", V1BETA)],
)
async def test_every_other_answer_under_v1beta_is_in_googles_shape_with_the_request_id(api, fake, method, path):
    response = await api.request(method, path, json={} if method == "POST" else None)
    assert response.status_code in (404, 405)
    error = response.json()["error"]
    assert error["code"] == response.status_code and error["status"] in ("NOT_FOUND", "INVALID_ARGUMENT")
    assert request_id_of(error) == response.headers["x-typesafe-request-id"]

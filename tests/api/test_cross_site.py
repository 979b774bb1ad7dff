"""No page on another website can make the service evaluate, label or store: bodies must be declared JSON (a
browser sends forms and `text/plain` cross-site without a preflight), and a browser's cross-origin POST is
refused whatever its type; `curl -d` without a JSON type learns what to send."""

from __future__ import annotations

import json

import pytest

from api.decisions.openapi_examples import DECISIONS_REQUEST
from tests.conftest import README_REQUEST

ROUTES = {
    "/v1/systemone": README_REQUEST,
    "/v1/decisions": DECISIONS_REQUEST,
    "/v1/classify": {"model": "sentiment", "input": "great"},
    "/v1/feedback": {"request_id": "req_x", "question_id": "refund", "label": True},
}


@pytest.mark.parametrize("path", list(ROUTES))
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
async def test_a_body_not_declared_json_is_refused_with_what_to_send(api, fake, path, content_type):
    headers = {} if content_type is None else {"Content-Type": content_type}
    response = await api.post(path, content=json.dumps(ROUTES[path]).encode(), headers=headers)
    assert response.status_code == 415, response.text
    assert "Content-Type: application/json" in response.text
    assert fake.generate_calls == 0


@pytest.mark.parametrize("path", list(ROUTES))
async def test_a_browser_post_from_another_origin_is_refused_even_as_json(api, fake, path):
    response = await api.post(path, json=ROUTES[path], headers={"Origin": "https://evil.example"})
    assert response.status_code == 403, response.text
    assert fake.generate_calls == 0


async def test_the_same_origin_and_clients_without_origin_are_served(api, fake):
    same = await api.post("/v1/systemone", json=README_REQUEST, headers={"Origin": "http://testserver"})
    plain = await api.post("/v1/systemone", json=README_REQUEST)
    typed = await api.post(
        "/v1/systemone",
        content=json.dumps(README_REQUEST).encode(),
        headers={"Content-Type": "application/json; charset=utf-8"},
    )
    assert [r.status_code for r in (same, plain, typed)] == [200, 200, 200]

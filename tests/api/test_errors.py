"""The error table of SPEC section 2.2: status, body shape, headers, and no backend call on 4xx."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from typing import Any

import pytest

from serving.evaluator import evaluator_install
from testbed.evaluators import fake_evaluator
from tests.api.helpers import NOUL, assert_error, assert_validation, body_with
from tests.conftest import README_REQUEST

INVALID: dict[str, tuple[Any, list[str | int]]] = {
    "unknown model": (body_with(model="gpt-4"), ["body", "model"]),
    "missing model": ({k: v for k, v in README_REQUEST.items() if k != "model"}, ["body", "model"]),
    "null state": (body_with(state=None), ["body", "state"]),
    "number state": (body_with(state=5), ["body", "state"]),
    "missing state": ({k: v for k, v in README_REQUEST.items() if k != "state"}, ["body", "state"]),
    "no questions": (body_with(questions={}), ["body", "questions"]),
    "questions as list": (body_with(questions=[NOUL]), ["body", "questions"]),
    "too many questions": (body_with(questions={str(i): NOUL for i in range(65)}), ["body", "questions"]),
    "empty question id": (body_with(questions={"": NOUL}), ["body", "questions", ""]),
    "type box": (body_with(questions={"q": {"type": "box"}}), ["body", "questions", "q", "type"]),
    "type boolean": (body_with(questions={"q": {"type": "boolean"}}), ["body", "questions", "q", "type"]),
    "missing type": (body_with(questions={"q": {"instructions": "x"}}), ["body", "questions", "q", "type"]),
    "number instructions": (
        body_with(questions={"q": {"type": "noul", "instructions": 3}}),
        ["body", "questions", "q", "instructions"],
    ),
    "noul unknown side": (
        body_with(questions={"q": {"type": "noul", "criteria": {"maybe": "x"}}}),
        ["body", "questions", "q", "criteria", "maybe"],
    ),
    "choice one option": (
        body_with(questions={"q": {"type": "choice", "criteria": {"a": None}}}),
        ["body", "questions", "q", "criteria"],
    ),
    "choice 256 options": (
        body_with(questions={"q": {"type": "choice", "criteria": {str(i): None for i in range(256)}}}),
        ["body", "questions", "q", "criteria"],
    ),
    "choice no criteria": (body_with(questions={"q": {"type": "choice"}}), ["body", "questions", "q", "criteria"]),
    "score map form": (
        body_with(questions={"q": {"type": "score", "criteria": {"0": "a", "1": "b"}}}),
        ["body", "questions", "q", "criteria"],
    ),
    "score one level": (
        body_with(questions={"q": {"type": "score", "criteria": ["a"]}}),
        ["body", "questions", "q", "criteria"],
    ),
    "score null level": (
        body_with(questions={"q": {"type": "score", "criteria": ["a", None]}}),
        ["body", "questions", "q", "criteria", 1],
    ),
    "bad chat role": (body_with(state=[{"role": "wizard", "content": "x"}]), ["body", "state", 0, "role"]),
    "audio content": (
        body_with(state=[{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]),
        ["body", "state", 0, "content", 0],
    ),
    "image url without a url": (
        body_with(state=[{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]),
        ["body", "state", 0, "content", 0, "image_url", "url"],
    ),
    "body not an object": ([1, 2], ["body"]),
}


@pytest.mark.parametrize("case", list(INVALID))
async def test_invalid_requests_get_422_with_a_location_and_no_backend_call(api, fake, case):
    body, loc = INVALID[case]
    response = await api.post("/v1/systemone", json=body)
    assert_validation(response, loc)
    assert fake.requests == []


async def test_token_budgets_are_checked_before_any_backend_call(api, fake, settings):
    evaluator_install(fake_evaluator(fake, max_input_tokens=50, max_total_input_tokens=100))
    response = await api.post("/v1/systemone", json=README_REQUEST)
    assert_validation(response, ["body", "questions"])
    assert fake.requests == []


async def test_auth_on_requires_the_bearer_key(api, fake, settings):
    settings.OPENJEV = replace(settings.OPENJEV, api_key="s3cret")
    missing = await api.post("/v1/systemone", json=README_REQUEST)
    assert_error(missing, 401, "authentication_error")
    assert missing.headers["www-authenticate"] == "Bearer"
    wrong = await api.post("/v1/systemone", json=README_REQUEST, headers={"Authorization": "Bearer nope"})
    assert_error(wrong, 401, "authentication_error")
    right = await api.post("/v1/systemone", json=README_REQUEST, headers={"Authorization": "Bearer s3cret"})
    assert right.status_code == 200
    assert fake.generate_calls == 2


async def test_auth_off_accepts_any_bearer(api, fake):
    response = await api.post("/v1/systemone", json=README_REQUEST, headers={"Authorization": "Bearer whatever"})
    assert response.status_code == 200


async def test_more_concurrent_evaluations_than_the_limit_get_529_with_retry_after(api, fake):
    evaluator_install(fake_evaluator(fake, max_concurrent_requests=1))
    fake.delay = 0.5
    first = asyncio.create_task(api.post("/v1/systemone", json=README_REQUEST))
    await asyncio.to_thread(fake.wait_in_flight, 1)
    second = await api.post("/v1/systemone", json=README_REQUEST)
    assert_error(second, 529, "overloaded")
    assert second.headers["retry-after"] == "1"
    assert (await first).status_code == 200


async def test_dead_backend_gets_503_with_retry_after(api, fake):
    fake.dead()
    response = await api.post("/v1/systemone", json=README_REQUEST)
    assert_error(response, 503, "backend_unavailable")
    assert "retry-after" in response.headers


@pytest.mark.parametrize("failure", ["status", "malformed"])
async def test_backend_errors_and_malformed_logprobs_get_502(api, fake, failure):
    if failure == "status":
        fake.fail_status = 500
    else:
        fake.malformed = "missing_logprobs"
    response = await api.post("/v1/systemone", json=README_REQUEST)
    assert_error(response, 502, "backend_error")


async def test_failed_branch_cancels_siblings_and_the_worker_aborts_them(api, fake):
    evaluator_install(fake_evaluator(fake, branch_mode="parallel"))
    fake.delay = 1
    fake.fail_after = 2  # the warm-up (delayed) and one branch (delayed) pass, every later call fails at once
    response = await api.post("/v1/systemone", json=README_REQUEST)
    assert_error(response, 502, "backend_error")
    await asyncio.to_thread(fake.wait_idle, 0.8)  # before the branch's 1 s delay ran out: it was cut
    assert fake.requests[1]["body"]["rid"] in fake.disconnected


async def test_evaluation_past_the_deadline_gets_504_and_the_worker_aborts_its_request(api, fake):
    evaluator_install(fake_evaluator(fake, request_timeout=0.3))
    fake.delay = 5
    response = await api.post("/v1/systemone", json=README_REQUEST)
    assert_error(response, 504, "timeout")
    await asyncio.to_thread(fake.wait_idle, 2)
    assert fake.disconnected == [fake.requests[0]["body"]["rid"]]


async def test_unknown_route_and_trailing_slash_get_json_404_not_a_redirect(api, fake):
    for path in ("/nope", "/v1/systemone/", "/v1/models/"):
        response = await api.get(path)
        assert_error(response, 404, "not_found")


async def test_wrong_method_gets_json_405(api, fake):
    assert_error(await api.get("/v1/systemone"), 405, "method_not_allowed")
    assert_error(await api.post("/v1/models", json={}), 405, "method_not_allowed")


async def test_no_csrf_check_on_the_api(api, fake):
    response = await api.post("/v1/systemone", json=README_REQUEST, headers={"Cookie": "csrftoken=abc"})
    assert response.status_code == 200


async def test_errors_from_the_evaluation_endpoint_carry_a_request_id(api, fake):
    response = await api.post("/v1/systemone", json=body_with(model="gpt-4"))
    assert response.status_code == 422
    assert response.headers["x-typesafe-request-id"].startswith("req_")


async def test_options_on_api_routes_is_answered_not_a_500(api, fake):
    response = await api.options("/v1/systemone")
    assert response.status_code == 200


BIG = str(2 * 1024 * 1024 + 1)
EVERY_API_RESPONSE: dict[str, tuple[str, str, dict[str, Any], int]] = {
    "200": ("POST", "/v1/systemone", {"json": README_REQUEST}, 200),
    "422": ("POST", "/v1/systemone", {"json": body_with(model="gpt-4")}, 422),
    "422 not JSON": ("POST", "/v1/systemone", {"content": b"{", "headers": {"Content-Type": "application/json"}}, 422),
    "415 not declared JSON": ("POST", "/v1/systemone", {"content": b"{}"}, 415),
    "400 corrupt gzip (guard)": (
        "POST",
        "/v1/systemone",
        {"content": b"x", "headers": {"Content-Encoding": "gzip"}},
        400,
    ),
    "413 (guard)": ("POST", "/v1/systemone", {"content": b"{}", "headers": {"Content-Length": BIG}}, 413),
    "415 (guard)": ("POST", "/v1/classify", {"content": b"{}", "headers": {"Content-Encoding": "br"}}, 415),
    "404": ("GET", "/v1/nope", {}, 404),
    "404 under /health": ("GET", "/health/nope", {}, 404),
    "405": ("GET", "/v1/systemone", {}, 405),
    "OPTIONS": ("OPTIONS", "/v1/models", {}, 200),
    "models": ("GET", "/v1/models", {}, 200),
    "limits": ("GET", "/v1/limits", {}, 200),
    "health": ("GET", "/health", {}, 200),
    "live": ("GET", "/health/live", {}, 200),
    "classify 404": ("POST", "/v1/classify", {"json": {"model": "nope", "input": "x"}}, 404),
}


@pytest.mark.parametrize("case", list(EVERY_API_RESPONSE))
async def test_every_api_response_carries_a_request_id(api, fake, case):
    method, path, options, status = EVERY_API_RESPONSE[case]
    response = await api.request(method, path, **options)
    assert response.status_code == status, response.text
    prefix = "classify-" if path == "/v1/classify" else "req_"
    assert re.fullmatch(prefix + "[0-9a-f]{32}", response.headers["x-typesafe-request-id"])


async def test_each_response_has_its_own_request_id_and_pages_outside_the_api_none(api, fake):
    ids = {(await api.get("/v1/nope")).headers["x-typesafe-request-id"] for _ in range(3)}
    assert len(ids) == 3
    assert "x-typesafe-request-id" not in (await api.get("/openapi.json")).headers

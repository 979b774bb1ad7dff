"""The error table of SPEC section 2.2: status, body shape, headers, and no backend call on 4xx."""

from __future__ import annotations

import asyncio
import gzip
import json
import re
from dataclasses import replace

import pytest
import zstandard

from evaluations.evaluator import evaluator_install
from testbed.evaluators import fake_evaluator
from tests.conftest import README_REQUEST

NOUL = {"type": "noul", "instructions": "Refund?"}


def body_with(**changes):
    return {**README_REQUEST, **changes}


def assert_validation(response, loc_prefix):
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, list) and detail
    assert all(set(d) == {"loc", "msg", "type"} and d["loc"][0] == "body" for d in detail)
    assert any(d["loc"][: len(loc_prefix)] == loc_prefix for d in detail), detail


def assert_error(response, status, error_type):
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    detail = response.json()["detail"]
    assert detail["error_type"] == error_type and isinstance(detail["message"], str)


INVALID = {
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
    "image content": (
        body_with(state=[{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]),
        ["body", "state", 0, "content", 0],
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


@pytest.mark.parametrize(
    "raw", [b'{"model": "jev-latest", "state": "x", "questions": {', b"\xff\xfe{}", b"", b'{"model": NaN}']
)
async def test_body_that_is_not_json_or_not_utf8_gets_400(api, fake, raw):
    response = await api.post("/v1/systemone", content=raw, headers={"Content-Type": "application/json"})
    assert_error(response, 400, "invalid_request")


async def test_gzip_and_zstd_bodies_are_decoded(api, fake):
    raw = json.dumps(README_REQUEST).encode()
    for encoding, data in (("gzip", gzip.compress(raw)), ("zstd", zstandard.ZstdCompressor().compress(raw))):
        response = await api.post(
            "/v1/systemone", content=data, headers={"Content-Type": "application/json", "Content-Encoding": encoding}
        )
        assert response.status_code == 200, (encoding, response.text)


async def test_unsupported_content_encoding_gets_415(api, fake):
    response = await api.post("/v1/systemone", content=b"{}", headers={"Content-Encoding": "br"})
    assert_error(response, 415, "unsupported_media_type")


@pytest.mark.parametrize("encoding", ["gzip", "zstd"])
async def test_corrupt_or_truncated_compressed_body_gets_400(api, fake, encoding):
    raw = json.dumps(README_REQUEST).encode()
    data = gzip.compress(raw) if encoding == "gzip" else zstandard.ZstdCompressor().compress(raw)
    for broken in (data[: len(data) // 2], b"not compressed at all"):
        response = await api.post("/v1/systemone", content=broken, headers={"Content-Encoding": encoding})
        assert_error(response, 400, "invalid_request")


async def test_body_over_the_limit_gets_413(api, fake):
    big = body_with(state="x" * (2 * 1024 * 1024 + 10))
    response = await api.post("/v1/systemone", json=big)
    assert_error(response, 413, "request_too_large")
    assert fake.requests == []


@pytest.mark.parametrize("encoding", ["gzip", "zstd"])
async def test_compression_bomb_gets_413(api, fake, encoding):
    bomb_raw = b'{"state": "' + b"a" * (50 * 1024 * 1024) + b'"}'
    bomb = gzip.compress(bomb_raw) if encoding == "gzip" else zstandard.ZstdCompressor().compress(bomb_raw)
    assert len(bomb) < 2 * 1024 * 1024
    response = await api.post("/v1/systemone", content=bomb, headers={"Content-Encoding": encoding})
    assert_error(response, 413, "request_too_large")


async def guard_refusal(scope, receive, *, read_timeout=5.0):
    """What the body reader alone (10 KiB limit) sends for `scope`, in front of an app that must not run."""
    from evaluations.request_body import RequestBodyReader

    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    async def app(scope, receive, send):
        raise AssertionError("the app must not run")

    await RequestBodyReader(app, max_bytes=10 * 1024, read_timeout=read_timeout)(scope, receive, send)
    return sent


class EndlessBody:
    """A client that streams 1 KiB chunks for ever; counts what the guard read."""

    def __init__(self):
        self.read = 0

    async def __call__(self):
        self.read += 1
        return {"type": "http.request", "body": b"x" * 1024, "more_body": True}


@pytest.mark.parametrize("method", ["POST", "GET", "DELETE", "HEAD", "OPTIONS", "PUT", "PATCH"])
async def test_a_body_over_the_limit_is_refused_on_every_method_before_it_is_all_read(method):
    body = EndlessBody()
    declared = {"type": "http", "method": method, "path": "/v1/models", "headers": [(b"content-length", b"99999")]}
    assert (await guard_refusal(declared, body))[0]["status"] == 413
    assert body.read == 0  # refused on the declared length alone
    streamed = {"type": "http", "method": method, "path": "/v1/models", "headers": []}
    assert (await guard_refusal(streamed, body))[0]["status"] == 413
    assert body.read == 11


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
EVERY_API_RESPONSE = {
    "200": ("POST", "/v1/systemone", {"json": README_REQUEST}, 200),
    "422": ("POST", "/v1/systemone", {"json": body_with(model="gpt-4")}, 422),
    "400 not JSON": ("POST", "/v1/systemone", {"content": b"{"}, 400),
    "400 corrupt gzip (guard)": ("POST", "/v1/systemone", {"content": b"x", "headers": {"Content-Encoding": "gzip"}},
                                 400),
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


async def test_a_get_with_a_body_is_limited_like_a_post(api, fake):
    response = await api.request("GET", "/v1/models", content=b"x" * (2 * 1024 * 1024 + 1))
    assert_error(response, 413, "request_too_large")
    assert (await api.request("GET", "/v1/models", content=b"small")).status_code == 200


async def test_a_body_that_stalls_gets_408_and_the_connection_closed():
    chunks = [{"type": "http.request", "body": b'{"model":', "more_body": True}]

    async def receive():
        if chunks:
            return chunks.pop()
        await asyncio.sleep(3600)  # the client stopped sending

    scope = {"type": "http", "method": "POST", "path": "/v1/systemone", "headers": []}
    sent = await asyncio.wait_for(guard_refusal(scope, receive, read_timeout=0.2), timeout=5)
    assert sent[0]["status"] == 408 and (b"connection", b"close") in sent[0]["headers"]
    assert json.loads(sent[1]["body"])["detail"]["error_type"] == "request_timeout"

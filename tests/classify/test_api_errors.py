"""`POST /v1/classify`'s errors: every one in SGLang's `{"error", "type", "code"}` shape with its status,
before any backend call where the client is at fault, with the worker's requests aborted where not."""

from __future__ import annotations

import asyncio
import gzip
import json
from dataclasses import replace

import pytest

from serving.evaluator import evaluator_install
from testbed.evaluators import fake_evaluator
from tests.classify.conftest import REVIEW, SENTIMENT, TEXTS, assert_classify_error, expected_prompt_tokens

BAD_BODIES = {
    "array body": ([{"model": "sentiment", "input": "x"}], "JSON object"),
    "missing model": ({"input": "x"}, "`model` is required"),
    "number model": ({"model": 3, "input": "x"}, "`model` must be"),
    "empty model": ({"model": "", "input": "x"}, "`model` must be"),
    "missing input": ({"model": "sentiment"}, "`input` is required"),
    "null input": ({"model": "sentiment", "input": None}, "string or a list of strings, got null"),
    "object input": ({"model": "sentiment", "input": {"text": "x"}}, "got object"),
    "empty list": ({"model": "sentiment", "input": []}, "must not be an empty list"),
    "token ids": ({"model": "sentiment", "input": [1, 2, 3]}, "token ids are not supported"),
    "mixed list": ({"model": "sentiment", "input": ["ok", None]}, "input[1] is null"),
    "too many texts": ({"model": "sentiment", "input": ["x"] * 65}, "at most 64"),
    "everything wrong": ({"model": None}, "`input` is required"),
}


@pytest.mark.parametrize("case", sorted(BAD_BODIES))
async def test_bad_bodies_get_400_in_the_classify_shape_and_no_backend_call(api, fake, sentiment, case):
    body, message = BAD_BODIES[case]
    response = await api.post("/v1/classify", json=body)
    assert message in assert_classify_error(response, 400, "invalid_request")["error"]
    assert response.headers["x-typesafe-request-id"].startswith("classify-")
    assert fake.requests == []


@pytest.mark.parametrize("raw", [b'{"model": "sentiment", "input": ', b"\xff\xfe{}", b"", b'{"model": NaN}'])
async def test_a_body_that_is_not_json_gets_400(api, fake, sentiment, raw):
    response = await api.post("/v1/classify", content=raw, headers={"Content-Type": "application/json"})
    assert_classify_error(response, 400, "invalid_request")


async def test_the_input_limit_is_a_setting(api, fake, sentiment, settings):
    settings.OPENJEV = replace(settings.OPENJEV, max_classify_inputs=2)
    refused = await api.post("/v1/classify", json={"model": "sentiment", "input": TEXTS[:3]})
    assert "at most 2" in assert_classify_error(refused, 400, "invalid_request")["error"]
    assert (await api.post("/v1/classify", json={"model": "sentiment", "input": TEXTS[:2]})).status_code == 200


async def test_unknown_classifier_gets_404(api, fake, sentiment):
    body = assert_classify_error(
        await api.post("/v1/classify", json={"model": "sentimnet", "input": "x"}), 404, "not_found"
    )
    assert "'sentimnet'" in body["error"] and "/v1/models" in body["error"]
    jev = assert_classify_error(
        await api.post("/v1/classify", json={"model": "jev-latest", "input": "x"}), 404, "not_found"
    )
    assert "language model" in jev["error"] and "/v1/systemone" in jev["error"]
    assert fake.requests == []


async def test_a_classifier_with_broken_labels_is_not_served(api, fake, classifiers):
    from tests.classify.conftest import Definition

    classifiers(Definition(name="lonely", labels=(("only", ""),)))
    body = assert_classify_error(
        await api.post("/v1/classify", json={"model": "lonely", "input": "x"}), 404, "not_found"
    )
    assert "2 to 255 labels" in body["error"]
    assert "lonely" not in [d["id"] for d in (await api.get("/v1/models")).json()["data"]]


async def test_token_budgets_apply_per_text_and_over_all_texts_with_400(api, fake, sentiment):
    tokens = expected_prompt_tokens(SENTIMENT, "short")
    evaluator_install(fake_evaluator(fake, max_input_tokens=tokens, max_total_input_tokens=tokens * 2))
    assert (await api.post("/v1/classify", json={"model": "sentiment", "input": "short"})).status_code == 200
    fake.reset()
    long = assert_classify_error(
        await api.post("/v1/classify", json={"model": "sentiment", "input": ["short", "a much longer text " * 20]}),
        400,
        "invalid_request",
    )
    assert "input[1] is too long" in long["error"]
    total = assert_classify_error(
        await api.post("/v1/classify", json={"model": "sentiment", "input": ["short", "short", "short"]}),
        400,
        "invalid_request",
    )
    assert "over all inputs" in total["error"]
    assert fake.requests == []


async def test_auth_on_requires_the_bearer_key_with_401(api, fake, sentiment, settings):
    settings.OPENJEV = replace(settings.OPENJEV, api_key="s3cret")
    for headers in ({}, {"Authorization": "Bearer nope"}):
        response = await api.post("/v1/classify", json={"model": "sentiment", "input": REVIEW}, headers=headers)
        assert_classify_error(response, 401, "authentication_error")
        assert response.headers["www-authenticate"] == "Bearer"
    right = await api.post(
        "/v1/classify", json={"model": "sentiment", "input": REVIEW}, headers={"Authorization": "Bearer s3cret"}
    )
    assert right.status_code == 200
    assert fake.generate_calls == 2


async def test_wrong_method_gets_405_in_the_classify_shape(api, fake):
    assert_classify_error(await api.get("/v1/classify"), 405, "method_not_allowed")
    assert (await api.options("/v1/classify")).status_code == 200
    assert (await api.get("/v1/classify/")).status_code == 404  # no trailing-slash redirect


async def test_body_guard_errors_use_the_classify_shape_on_this_route(api, fake, sentiment):
    assert_classify_error(
        await api.post("/v1/classify", content=b"{}", headers={"Content-Encoding": "br"}), 415, "unsupported_media_type"
    )
    big = {"model": "sentiment", "input": "x" * (2 * 1024 * 1024 + 10)}
    assert_classify_error(await api.post("/v1/classify", json=big), 413, "request_too_large")
    corrupt = gzip.compress(json.dumps({"model": "sentiment", "input": REVIEW}).encode())[:20]
    assert_classify_error(
        await api.post("/v1/classify", content=corrupt, headers={"Content-Encoding": "gzip"}), 400, "invalid_request"
    )
    ok = gzip.compress(json.dumps({"model": "sentiment", "input": REVIEW}).encode())
    headers = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
    assert (await api.post("/v1/classify", content=ok, headers=headers)).status_code == 200
    # Other routes keep the Jev shape.
    jev = await api.post("/v1/systemone", content=b"{}", headers={"Content-Encoding": "br"})
    assert jev.json()["detail"]["error_type"] == "unsupported_media_type"


async def test_dead_backend_gets_503_with_retry_after(api, fake, sentiment):
    fake.dead()
    response = await api.post("/v1/classify", json={"model": "sentiment", "input": REVIEW})
    assert_classify_error(response, 503, "backend_unavailable")
    assert response.headers["retry-after"] == "5"


@pytest.mark.parametrize("failure", ["status", "malformed"])
async def test_backend_errors_get_502(api, fake, sentiment, failure):
    if failure == "status":
        fake.fail_status = 500
    else:
        fake.malformed = "missing_logprobs"
    assert_classify_error(
        await api.post("/v1/classify", json={"model": "sentiment", "input": TEXTS}), 502, "backend_error"
    )


async def test_one_failing_text_fails_the_request_and_the_worker_aborts_the_others(api, fake, sentiment):
    evaluator_install(fake_evaluator(fake, branch_mode="parallel"))
    fake.delay = 5
    fake.fail_after = 1  # the first warm-up waits (delayed), every later call fails at once
    assert_classify_error(
        await api.post("/v1/classify", json={"model": "sentiment", "input": TEXTS}), 502, "backend_error"
    )
    await asyncio.to_thread(fake.wait_idle, 2)  # long before the 5 s delay: the waiting call was cut
    assert fake.disconnected == [fake.requests[0]["body"]["rid"]]


async def test_past_the_deadline_gets_504_and_the_worker_aborts(api, fake, sentiment):
    evaluator_install(fake_evaluator(fake, request_timeout=0.3))
    fake.delay = 5
    response = await api.post("/v1/classify", json={"model": "sentiment", "input": TEXTS[:2]})
    assert_classify_error(response, 504, "timeout")
    await asyncio.to_thread(fake.wait_idle, 2)
    assert {r["body"]["rid"] for r in fake.requests} == set(fake.disconnected)

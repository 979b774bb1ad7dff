"""`POST /v1/classify` against the fake SGLang: the exact SGLang / vLLM response shape, list input order,
one admission per request, the three classifier types, `/v1/models`, and every error in the
`{"error", "type", "code"}` shape with its status."""

from __future__ import annotations

import asyncio
import gzip
import json
import math
import re
import time
from dataclasses import replace

import pytest

from evaluations.evaluator import evaluator_install
from testbed.evaluators import fake_evaluator
from tests.classify.conftest import SENTIMENT, SPAM, URGENCY, expected_probs, expected_prompt_tokens

REVIEW = "Loved the new café—coffee was great."
TEXTS = ["Loved the new café—coffee was great.", "The delivery was late and the box was crushed.",
         "The parcel arrived on Tuesday.", "Worst support I have ever dealt with."]


def assert_close(a: list[float], b: list[float]) -> None:
    assert len(a) == len(b) and all(math.isclose(x, y, abs_tol=1e-9) for x, y in zip(a, b, strict=True)), (a, b)


def assert_classify_error(response, status: int, error_type: str) -> dict:
    """SGLang's error body, exactly: `{"error": message, "type": ..., "code": status}`."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error", "type", "code"}, body
    assert isinstance(body["error"], str) and body["error"]
    assert body["type"] == error_type and body["code"] == status and type(body["code"]) is int
    return body


@pytest.fixture
def sentiment(classifiers):
    classifiers(SENTIMENT, SPAM, URGENCY)


async def test_one_text_gets_exactly_the_sglang_response_shape(api, fake, sentiment):
    before = int(time.time())
    response = await api.post("/v1/classify", json={"model": "sentiment", "input": REVIEW})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()

    assert list(body) == ["id", "object", "created", "model", "data", "usage"]
    assert re.fullmatch(r"classify-[0-9a-f]{32}", body["id"])
    assert response.headers["x-typesafe-request-id"] == body["id"]
    assert body["object"] == "list"
    assert type(body["created"]) is int and before <= body["created"] <= int(time.time())
    assert body["model"] == "sentiment"

    (item,) = body["data"]
    assert list(item) == ["index", "label", "probs", "num_classes"]
    assert item["index"] == 0 and type(item["index"]) is int
    assert item["num_classes"] == 3 and type(item["num_classes"]) is int
    assert all(type(p) is float for p in item["probs"])
    expected = expected_probs(fake, SENTIMENT, REVIEW)
    assert_close(item["probs"], expected)
    assert math.isclose(sum(item["probs"]), 1.0)
    assert item["label"] == ["positive", "negative", "neutral"][expected.index(max(expected))]

    usage = body["usage"]
    assert list(usage) == ["prompt_tokens", "total_tokens", "completion_tokens", "prompt_tokens_details"]
    assert usage["prompt_tokens"] == usage["total_tokens"] == expected_prompt_tokens(SENTIMENT, REVIEW)
    assert type(usage["prompt_tokens"]) is int
    assert usage["completion_tokens"] == 0 and type(usage["completion_tokens"]) is int
    assert usage["prompt_tokens_details"] is None
    assert fake.generate_calls == 2  # one warm-up and one branch, as a one-question System One call


async def test_a_list_of_texts_gets_one_result_each_in_input_order(api, fake, sentiment):
    response = await api.post("/v1/classify", json={"model": "sentiment", "input": TEXTS})
    assert response.status_code == 200, response.text
    body = response.json()
    assert [item["index"] for item in body["data"]] == [0, 1, 2, 3]
    for text, item in zip(TEXTS, body["data"], strict=True):
        expected = expected_probs(fake, SENTIMENT, text)
        assert_close(item["probs"], expected)
        assert item["label"] == ["positive", "negative", "neutral"][expected.index(max(expected))]
        assert item["num_classes"] == 3
    assert body["usage"]["prompt_tokens"] == sum(expected_prompt_tokens(SENTIMENT, t) for t in TEXTS)
    assert fake.generate_calls == 2 * len(TEXTS)
    # The same texts in reverse order get the same results, reversed: nothing leaks between inputs.
    reverse = (await api.post("/v1/classify", json={"model": "sentiment", "input": TEXTS[::-1]})).json()
    assert [i["probs"] for i in reverse["data"]] == [i["probs"] for i in body["data"]][::-1]


async def test_a_one_item_list_is_answered_like_the_single_text(api, fake, sentiment):
    single = (await api.post("/v1/classify", json={"model": "sentiment", "input": REVIEW})).json()
    listed = (await api.post("/v1/classify", json={"model": "sentiment", "input": [REVIEW]})).json()
    assert listed["data"] == single["data"] and listed["usage"] == single["usage"]


async def test_all_texts_of_a_request_run_concurrently_under_one_admission(api, fake, sentiment):
    evaluator = fake_evaluator(fake, max_concurrent_requests=1, branch_mode="parallel")
    evaluator_install(evaluator)
    fake.delay = 0.3
    first = asyncio.create_task(api.post("/v1/classify", json={"model": "sentiment", "input": TEXTS}))
    await asyncio.to_thread(fake.wait_in_flight, len(TEXTS))  # every text's warm-up is in flight at once
    assert evaluator.gate.active == 1
    second = await api.post("/v1/classify", json={"model": "sentiment", "input": REVIEW})
    body = assert_classify_error(second, 529, "overloaded")
    assert second.headers["retry-after"] == "1" and "limit 1" in body["error"]
    assert (await first).status_code == 200
    assert evaluator.gate.active == 0


async def test_a_noul_classifier_answers_true_or_false_with_p_true_first(api, fake, sentiment):
    text = "Congratulations!!! You won a free cruise, click here to claim it."
    body = (await api.post("/v1/classify", json={"model": "spam", "input": text})).json()
    (item,) = body["data"]
    expected = expected_probs(fake, SPAM, text)
    assert_close(item["probs"], expected)
    assert item["num_classes"] == 2 and item["label"] == ("true" if expected[0] >= expected[1] else "false")


async def test_a_score_classifier_answers_with_level_names_lowest_first(api, fake, sentiment):
    text = "Our whole production cluster is down!"
    body = (await api.post("/v1/classify", json={"model": "urgency", "input": text})).json()
    (item,) = body["data"]
    expected = expected_probs(fake, URGENCY, text)
    assert_close(item["probs"], expected)
    assert item["num_classes"] == 3 and item["label"] == ["low", "normal", "high"][expected.index(max(expected))]


async def test_ties_go_to_the_first_label(api, fake, sentiment, monkeypatch):
    fake.logprob_fn = lambda ids, token_id: -1.0  # every label equally likely
    body = (await api.post("/v1/classify", json={"model": "sentiment", "input": REVIEW})).json()
    assert body["data"][0]["label"] == "positive"
    assert_close(body["data"][0]["probs"], [1 / 3] * 3)


async def test_other_request_fields_are_ignored(api, fake, sentiment):
    response = await api.post("/v1/classify", json={"model": "sentiment", "input": REVIEW, "user": "u-1",
                                                    "rid": "abc", "priority": 3})
    assert response.status_code == 200


async def test_models_lists_classifiers_in_data_only(api, fake, sentiment, settings):
    body = (await api.get("/v1/models")).json()
    config = settings.OPENJEV
    assert [m["name"] for m in body["models"]] == [config.model_alias, config.model]
    assert [d["id"] for d in body["data"]] == [config.model_alias, config.model, "sentiment", "spam", "urgency"]
    assert all(set(d) == {"id", "object", "owned_by"} and d["object"] == "model" for d in body["data"])


async def test_models_still_answers_when_classifiers_cannot_be_read(api, fake, monkeypatch, settings):
    from evaluations.classify import registry

    def broken() -> dict:
        raise RuntimeError("database down")

    monkeypatch.setattr(registry, "_classifiers_fetch", broken)
    response = await api.get("/v1/models")
    assert response.status_code == 200
    assert [d["id"] for d in response.json()["data"]] == [settings.OPENJEV.model_alias, settings.OPENJEV.model]
    refused = await api.post("/v1/classify", json={"model": "sentiment", "input": REVIEW})
    assert_classify_error(refused, 503, "service_unavailable")
    assert refused.headers["retry-after"] == "5"


# ---------------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------------

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
    body = assert_classify_error(await api.post("/v1/classify", json={"model": "sentimnet", "input": "x"}),
                                 404, "not_found")
    assert "'sentimnet'" in body["error"] and "/v1/models" in body["error"]
    jev = assert_classify_error(await api.post("/v1/classify", json={"model": "jev-latest", "input": "x"}),
                                404, "not_found")
    assert "language model" in jev["error"] and "/v1/systemone" in jev["error"]
    assert fake.requests == []


async def test_a_classifier_with_broken_labels_is_not_served(api, fake, classifiers):
    from tests.classify.conftest import Definition

    classifiers(Definition(name="lonely", labels=(("only", ""),)))
    body = assert_classify_error(await api.post("/v1/classify", json={"model": "lonely", "input": "x"}),
                                 404, "not_found")
    assert "2 to 255 labels" in body["error"]
    assert "lonely" not in [d["id"] for d in (await api.get("/v1/models")).json()["data"]]


async def test_token_budgets_apply_per_text_and_over_all_texts_with_400(api, fake, sentiment):
    tokens = expected_prompt_tokens(SENTIMENT, "short")
    evaluator_install(fake_evaluator(fake, max_input_tokens=tokens, max_total_input_tokens=tokens * 2))
    assert (await api.post("/v1/classify", json={"model": "sentiment", "input": "short"})).status_code == 200
    fake.reset()
    long = assert_classify_error(
        await api.post("/v1/classify", json={"model": "sentiment", "input": ["short", "a much longer text " * 20]}),
        400, "invalid_request")
    assert "input[1] is too long" in long["error"]
    total = assert_classify_error(
        await api.post("/v1/classify", json={"model": "sentiment", "input": ["short", "short", "short"]}),
        400, "invalid_request")
    assert "over all inputs" in total["error"]
    assert fake.requests == []


async def test_auth_on_requires_the_bearer_key_with_401(api, fake, sentiment, settings):
    settings.OPENJEV = replace(settings.OPENJEV, api_key="s3cret")
    for headers in ({}, {"Authorization": "Bearer nope"}):
        response = await api.post("/v1/classify", json={"model": "sentiment", "input": REVIEW}, headers=headers)
        assert_classify_error(response, 401, "authentication_error")
        assert response.headers["www-authenticate"] == "Bearer"
    right = await api.post("/v1/classify", json={"model": "sentiment", "input": REVIEW},
                           headers={"Authorization": "Bearer s3cret"})
    assert right.status_code == 200
    assert fake.generate_calls == 2


async def test_wrong_method_gets_405_in_the_classify_shape(api, fake):
    assert_classify_error(await api.get("/v1/classify"), 405, "method_not_allowed")
    assert (await api.options("/v1/classify")).status_code == 200
    assert (await api.get("/v1/classify/")).status_code == 404  # no trailing-slash redirect


async def test_body_guard_errors_use_the_classify_shape_on_this_route(api, fake, sentiment):
    assert_classify_error(await api.post("/v1/classify", content=b"{}", headers={"Content-Encoding": "br"}),
                          415, "unsupported_media_type")
    big = {"model": "sentiment", "input": "x" * (2 * 1024 * 1024 + 10)}
    assert_classify_error(await api.post("/v1/classify", json=big), 413, "request_too_large")
    corrupt = gzip.compress(json.dumps({"model": "sentiment", "input": REVIEW}).encode())[:20]
    assert_classify_error(await api.post("/v1/classify", content=corrupt, headers={"Content-Encoding": "gzip"}),
                          400, "invalid_request")
    ok = gzip.compress(json.dumps({"model": "sentiment", "input": REVIEW}).encode())
    assert (await api.post("/v1/classify", content=ok, headers={"Content-Encoding": "gzip"})).status_code == 200
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
    assert_classify_error(await api.post("/v1/classify", json={"model": "sentiment", "input": TEXTS}),
                          502, "backend_error")


async def test_one_failing_text_fails_the_request_and_the_worker_aborts_the_others(api, fake, sentiment):
    evaluator_install(fake_evaluator(fake, branch_mode="parallel"))
    fake.delay = 5
    fake.fail_after = 1  # the first warm-up waits (delayed), every later call fails at once
    assert_classify_error(await api.post("/v1/classify", json={"model": "sentiment", "input": TEXTS}),
                          502, "backend_error")
    await asyncio.to_thread(fake.wait_idle, 2)  # long before the 5 s delay: the waiting call was cut
    assert fake.disconnected == [fake.requests[0]["body"]["rid"]]


async def test_past_the_deadline_gets_504_and_the_worker_aborts(api, fake, sentiment):
    evaluator_install(fake_evaluator(fake, request_timeout=0.3))
    fake.delay = 5
    response = await api.post("/v1/classify", json={"model": "sentiment", "input": TEXTS[:2]})
    assert_classify_error(response, 504, "timeout")
    await asyncio.to_thread(fake.wait_idle, 2)
    assert {r["body"]["rid"] for r in fake.requests} == set(fake.disconnected)

"""`POST /v1/classify` against the fake SGLang: the exact SGLang / vLLM response shape, list input order,
one admission per request, the three classifier types, `/v1/models`, and every error in the
`{"error", "type", "code"}` shape with its status."""

from __future__ import annotations

import asyncio
import math
import re
import time

import openai

from inference.scoring import probabilities_served
from serving.evaluator import evaluator_install
from testbed.evaluators import fake_evaluator
from tests.classify.conftest import (
    REVIEW,
    SENTIMENT,
    SPAM,
    TEXTS,
    URGENCY,
    assert_classify_error,
    expected_probs,
    expected_prompt_tokens,
)


def assert_close(a: list[float], b: list[float]) -> None:
    """`a` is `b` as the server serves probabilities: in millionths summing to one (`probabilities_served`)."""
    assert a == list(probabilities_served(b)), (a, b)


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
    response = await api.post(
        "/v1/classify", json={"model": "sentiment", "input": REVIEW, "user": "u-1", "rid": "abc", "priority": 3}
    )
    assert response.status_code == 200


async def test_models_lists_classifiers_in_data_only(api, fake, sentiment, settings):
    body = (await api.get("/v1/models")).json()
    config = settings.OPENJEV
    assert [m["name"] for m in body["models"]] == [config.model_alias, config.model]
    assert [d["id"] for d in body["data"]] == [config.model_alias, config.model, "sentiment", "spam", "urgency"]
    assert all(set(d) == {"id", "object", "created", "owned_by"} and d["object"] == "model" for d in body["data"])
    for entry in body["data"]:  # what the official SDK reads each entry as
        openai.types.Model.model_validate(entry, strict=True)


async def test_models_still_answers_when_classifiers_cannot_be_read(api, fake, monkeypatch, settings):
    from api.classify import registry

    def broken() -> dict:
        raise RuntimeError("database down")

    monkeypatch.setattr(registry, "_classifiers_fetch", broken)
    response = await api.get("/v1/models")
    assert response.status_code == 200
    assert [d["id"] for d in response.json()["data"]] == [settings.OPENJEV.model_alias, settings.OPENJEV.model]
    refused = await api.post("/v1/classify", json={"model": "sentiment", "input": REVIEW})
    assert_classify_error(refused, 503, "service_unavailable")
    assert refused.headers["retry-after"] == "5"

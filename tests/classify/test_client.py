"""Drop-in clients: the SGLang documentation's Python example, word for word, against the real app under
uvicorn, and vLLM's example client, which takes its model from `GET /v1/models`."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.classify.conftest import SENTIMENT, expected_probs


@pytest.fixture
def server(asgi_server, classifiers):
    classifiers(SENTIMENT)
    return asgi_server


def test_the_sglang_docs_example_with_requests(server, fake):
    requests = pytest.importorskip("requests")
    # From SGLang's "Classification API" page ("Using Python"), with its URL and model swapped for ours.
    response = requests.post(
        server.url + "/v1/classify",
        headers={"Content-Type": "application/json"},
        json={
            "model": "sentiment",
            "input": "Loved the new café—coffee was great.",
        },
    )
    result = response.json()
    print(json.dumps(result, indent=2))

    assert response.status_code == 200
    assert result["object"] == "list" and result["model"] == "sentiment"
    (item,) = result["data"]
    assert item["index"] == 0 and item["num_classes"] == 3 and item["label"] in ("positive", "negative", "neutral")
    assert item["probs"] == pytest.approx(expected_probs(fake, SENTIMENT, "Loved the new café—coffee was great."))
    assert result["usage"]["completion_tokens"] == 0 and result["usage"]["prompt_tokens_details"] is None


def test_the_same_example_with_a_plain_httpx_client(server, fake):
    response = httpx.post(
        server.url + "/v1/classify",
        headers={"Content-Type": "application/json"},
        json={"model": "sentiment", "input": "Loved the new café—coffee was great."},
    )
    assert response.status_code == 200
    assert response.json()["data"][0]["probs"] == pytest.approx(
        expected_probs(fake, SENTIMENT, "Loved the new café—coffee was great.")
    )
    missing = httpx.post(server.url + "/v1/classify", json={"model": "nope", "input": "x"})
    assert missing.status_code == 404 and missing.json()["code"] == 404


def test_vllms_example_client_finds_the_classifier_in_the_model_list(server, fake):
    """vLLM's `classify` example reads `data[...]["id"]` from `/v1/models` and posts a list of prompts."""
    headers = {"accept": "application/json", "Content-Type": "application/json"}
    models = httpx.get(server.url + "/v1/models", headers=headers).json()
    model = next(d["id"] for d in models["data"] if d["id"] == "sentiment")
    prompts = [
        "Hello, my name is",
        "The president of the United States is",
        "The capital of France is",
        "The future of AI is",
    ]
    response = httpx.post(server.url + "/v1/classify", headers=headers, json={"model": model, "input": prompts})
    assert response.status_code == 200
    data = response.json()["data"]
    assert [d["index"] for d in data] == [0, 1, 2, 3]
    for prompt, item in zip(prompts, data, strict=True):
        assert item["probs"] == pytest.approx(expected_probs(fake, SENTIMENT, prompt))

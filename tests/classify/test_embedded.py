"""`POST /v1/classify` end to end on the embedded engine: the default bundled model (Qwen2.5-Coder-1.5B,
llama.cpp, CPU, debiased at its fitted temperature as `runserver` serves it) behind the real API, with a
sentiment classifier positive / negative / neutral as an admin would plausibly write it, on clearly
worded positive and negative texts. Results are deterministic for a given model: the same text gets the
same probabilities alone or in a batch of concurrent inputs (asserted below).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from inference.backends.llamacpp import LlamaCppBackend
from inference.gguf import BUNDLED, DEFAULT_SOURCE
from tests.classify.conftest import Definition
from tests.embedded import api_on, bundled_backend

pytestmark = pytest.mark.embedded

SENTIMENT = Definition(
    name="sentiment",
    instructions="What is the sentiment of this review?",
    labels=(("positive", "Positive"), ("negative", "Negative"), ("neutral", "Neutral")),
)
CLEAR = {
    "I absolutely love this phone. Best purchase I have made all year!": "positive",
    "I am so happy with my new bike!": "positive",
    "Excellent quality and super fast delivery. Highly recommended!": "positive",
    "This is the worst product I have ever bought. It broke after one day and support ignored me.": "negative",
    "Terrible service. The food was cold and the waiter was rude.": "negative",
    "I hate this app, it crashes constantly.": "negative",
}
"""Plain factual statements are left out on purpose: the 1.5B reads them as mildly positive (about 0.45
positive / 0.3 neutral), a limitation of the model recorded in docs/quality.md, not of the API."""


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaCppBackend]:
    with bundled_backend(source=DEFAULT_SOURCE) as backend:
        yield backend


@pytest.fixture
async def embedded_api(llama: LlamaCppBackend, classifiers) -> AsyncIterator[httpx.AsyncClient]:
    classifiers(SENTIMENT)
    async with api_on(backend=llama) as client:
        yield client


async def test_a_sentiment_classifier_labels_clear_texts_right(embedded_api):
    texts = list(CLEAR)
    response = await embedded_api.post("/v1/classify", json={"model": "sentiment", "input": texts})
    assert response.status_code == 200, response.text
    body = response.json()
    assert response.headers["x-openjev-model"] == BUNDLED[DEFAULT_SOURCE].served_name
    got = {text: item["label"] for text, item in zip(texts, body["data"], strict=True)}
    assert got == CLEAR
    for item in body["data"]:
        assert item["num_classes"] == 3 and sum(item["probs"]) == pytest.approx(1.0)
        best = max(item["probs"])
        assert item["probs"].index(best) == ["positive", "negative", "neutral"].index(item["label"])
        assert best - sorted(item["probs"])[-2] > 0.02  # a real margin, not a coin toss
    assert body["usage"]["prompt_tokens"] > 0 and body["usage"]["completion_tokens"] == 0

    # Alone, a text gets exactly what it got among the others: inputs do not leak into each other.
    alone = await embedded_api.post("/v1/classify", json={"model": "sentiment", "input": texts[3]})
    assert alone.json()["data"][0]["probs"] == pytest.approx(body["data"][3]["probs"], abs=1e-6)

"""Fixtures for `POST /v1/classify`: classifiers installed without a database, and predictions of the
fake SGLang's answers (the plans the server compiles, computed the same way, as `tests/api/helpers.py` does).

Tests marked `django_db` define classifiers in the real tables instead (the admin or the ORM); they run
with storage on and stop the writer at the end, like `tests/storage/`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from api.classify import registry
from api.classify.registry import ClassifierSpec, classifier_spec_build
from audit.storage.writer import writer_stop
from fake_sglang import FakeSGLang
from inference.prompts import Budget, Plan, plan_compile
from inference.requests import conversation_of_text
from inference.scoring import probabilities_compute, probabilities_served
from testbed.qwen3 import qwen3_labels, qwen3_tokenizer

SENTIMENT_LABELS = (
    ("positive", "The text expresses a positive opinion or feeling"),
    ("negative", "The text expresses a negative opinion or feeling"),
    ("neutral", "The text is factual or expresses no clear opinion"),
)


@dataclass(frozen=True)
class Definition:
    """A classifier as an admin would define it."""

    name: str
    labels: Sequence[tuple[str, str]]
    type: str = "choice"
    instructions: str = ""
    description: str = ""


SENTIMENT = Definition(
    name="sentiment",
    labels=SENTIMENT_LABELS,
    instructions="What is the sentiment of this text?",
    description="Review sentiment",
)
SPAM = Definition(
    name="spam",
    type="noul",
    labels=(("true", "Unsolicited advertising or a scam"),),
    instructions="Is this message spam?",
)
URGENCY = Definition(
    name="urgency",
    type="score",
    labels=(("low", ""), ("normal", "Answer within a day"), ("high", "Answer within the hour")),
    instructions="How urgently must support answer?",
)


def spec_of(definition: Definition, *, id: int | None = None) -> ClassifierSpec:
    return classifier_spec_build(
        id=id,
        name=definition.name,
        type=definition.type,
        description=definition.description,
        instructions=definition.instructions,
        labels=definition.labels,
        max_answers=255,
    )


@pytest.fixture
def classifiers(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """classifiers(SENTIMENT, ...) serves these classifiers for this test, without a database."""

    def install(*definitions: Definition) -> None:
        specs = {d.name: spec_of(d) for d in definitions}
        monkeypatch.setattr(registry, "_classifiers_fetch", lambda: dict(specs))
        registry.classifier_cache_forget()

    return install


REVIEW = "Loved the new café—coffee was great."
TEXTS = [
    "Loved the new café—coffee was great.",
    "The delivery was late and the box was crushed.",
    "The parcel arrived on Tuesday.",
    "Worst support I have ever dealt with.",
]


def plan_of(definition: Definition, text: str) -> Plan:
    """The plan the server compiles for `text` with this classifier."""
    question = spec_of(definition).question
    assert question is not None
    return plan_compile(
        conversation=conversation_of_text(text=text),
        questions=(question,),
        tokenizer=qwen3_tokenizer(),
        labels=qwen3_labels(),
        budget=Budget(32768, 262144),
    )


def expected_probs(fake: FakeSGLang, definition: Definition, text: str) -> list[float]:
    """What the server must answer for `text` against the fake SGLang: its label log-probs, renormalised, served in
    millionths."""
    plan = plan_of(definition, text)
    (branch,) = plan.branches
    logprobs = [fake.predict_logprob(plan.branch_ids(branch), t) for t in branch.label_ids]
    return list(probabilities_served(probabilities_compute(logprobs=logprobs, temperature=1.0)))


def expected_prompt_tokens(definition: Definition, text: str) -> int:
    return plan_of(definition, text).input_tokens


@pytest.fixture(autouse=True)
def _writer_stopped(request: pytest.FixtureRequest) -> Iterator[None]:
    """Database tests end with the storage writer stopped and its connection closed (PostgreSQL must be
    able to drop the test database)."""
    yield
    if request.node.get_closest_marker("django_db") is not None:
        assert writer_stop(timeout=30), "the storage writer did not stop"


@pytest.fixture
def sentiment(classifiers: Callable[..., None]) -> None:
    """The three example classifiers, saved."""
    classifiers(SENTIMENT, SPAM, URGENCY)


def assert_classify_error(response: httpx.Response, status: int, error_type: str) -> dict[str, Any]:
    """SGLang's error body, exactly: `{"error": message, "type": ..., "code": status}`."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error", "type", "code"}, body
    assert isinstance(body["error"], str) and body["error"]
    assert body["type"] == error_type and body["code"] == status and type(body["code"]) is int
    return body

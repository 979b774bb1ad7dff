"""The official `openai` SDK (pinned) against the real server on a socket and the SGLang stand-in: sync and
async `client.decisions.create`, raw responses for the headers, and its errors and retries.

Every answer is also read by the SDK's own pydantic model, strictly (`Decision.model_validate`), since the
SDK itself builds its response objects without validating them.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import replace
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI, OpenAI
from openai.types import Decision

from api.decisions.openapi_examples import DECISIONS_CHAT_REQUEST, DECISIONS_REQUEST


def _client(server, **options) -> OpenAI:
    return OpenAI(base_url=f"{server.url}/v1", api_key="unused", **options)


def _checked(decision: Decision) -> Decision:
    """The SDK's object, validated again by its own model from the JSON it came from."""
    return Decision.model_validate(decision.model_dump(mode="json", exclude_unset=True), strict=True)


def test_the_sdk_gets_typed_answers_in_question_order(asgi_server, fake):
    decision = _checked(_client(asgi_server).decisions.create(**DECISIONS_REQUEST))
    refund, team, anger = decision.answers
    assert refund.type == "predicate" and refund.name == "refund" and 0 <= refund.probability <= 1
    assert team.type == "choice" and [p.value for p in team.probabilities] == ["Billing", "Technical", "Sales"]
    assert anger.type == "score" and [p.label for p in anger.probabilities] == ["Calm", "Frustrated", "Very angry"]
    assert decision.usage.output_tokens == 4


def test_the_sdk_sends_messages_tool_calls_and_boolean_choices(asgi_server, fake):
    decision = _checked(_client(asgi_server).decisions.create(**DECISIONS_CHAT_REQUEST))
    outage, technical = decision.answers
    assert outage.type == "predicate" and technical.type == "choice"
    assert {type(p.value) for p in technical.probabilities} == {bool}


def test_the_raw_response_carries_the_request_id_the_sdk_exposes(asgi_server, fake):
    raw = _client(asgi_server).decisions.with_raw_response.create(**DECISIONS_REQUEST)
    assert raw.headers["x-request-id"] == raw.headers["x-typesafe-request-id"]
    assert raw.headers["x-openjev-model"] == "Qwen/Qwen3.6-35B-A3B"
    decision = raw.parse()
    assert decision._request_id == raw.headers["x-request-id"]
    assert len(decision.answers) == 3


async def test_the_async_sdk_gets_the_same_answers(asgi_server, fake):
    async with AsyncOpenAI(base_url=f"{asgi_server.url}/v1", api_key="unused") as client:
        decision = _checked(await client.decisions.create(**DECISIONS_REQUEST))
    again = _checked(_client(asgi_server).decisions.create(**DECISIONS_REQUEST))
    assert decision.answers == again.answers


def test_an_invalid_request_raises_bad_request_with_the_field(asgi_server, fake):
    questions: list[Any] = [{"type": "choice", "instructions": "Which?", "choices": [{"value": "only"}]}]
    with pytest.raises(openai.BadRequestError) as raised:
        _client(asgi_server, max_retries=0).decisions.create(model="jev-latest", input="hi", questions=questions)
    assert raised.value.status_code == 400
    assert raised.value.param == "questions[0].choices" and raised.value.code == "array_below_min_length"
    assert raised.value.request_id is not None


def test_an_unknown_model_raises_not_found(asgi_server, fake):
    with pytest.raises(openai.NotFoundError) as raised:
        _client(asgi_server, max_retries=0).decisions.create(**{**DECISIONS_REQUEST, "model": "gpt-6-luna"})
    assert raised.value.code == "model_not_found" and raised.value.param == "model"


def test_a_wrong_key_raises_authentication_error(asgi_server, fake, settings):
    settings.OPENJEV = replace(settings.OPENJEV, api_key="sk-right")
    with pytest.raises(openai.AuthenticationError) as raised:
        _client(asgi_server, max_retries=0).decisions.create(**DECISIONS_REQUEST)
    assert raised.value.code == "invalid_api_key"
    right = OpenAI(base_url=f"{asgi_server.url}/v1", api_key="sk-right").decisions.create(**DECISIONS_REQUEST)
    assert len(right.answers) == 3


def test_the_sdk_retries_a_dead_backend_twice_after_retry_after_and_never_a_deadline(
    asgi_server, fake, evaluator, monkeypatch
):
    """`x-should-retry` decides: a dead backend (503) is tried three times in all, the SDK's default of two
    retries, each after the `Retry-After` the server sent (1 s here, against the 5 s it sends in production,
    so the test stays short; the SDK's own backoff would wait at most 0.5 s before the first retry, so a
    first wait of a second is the header's); a 504 is never retried. Nothing of the SDK is patched: what
    is counted and timed is what reached the wire."""
    from api.plumbing import error_responses

    sent: list[tuple[int, float]] = []
    transport = httpx.HTTPTransport()
    original = transport.handle_request

    def counting(request: httpx.Request) -> httpx.Response:
        started = time.monotonic()
        response = original(request)
        sent.append((response.status_code, started))
        return response

    monkeypatch.setattr(transport, "handle_request", counting)
    monkeypatch.setitem(error_responses.RETRY_AFTER, 503, "1")
    client = _client(asgi_server, http_client=httpx.Client(transport=transport))  # the default max_retries
    fake.dead()
    with pytest.raises(openai.InternalServerError) as raised:
        client.decisions.create(**DECISIONS_REQUEST)
    assert raised.value.response.headers["retry-after"] == "1"
    assert [status for status, _ in sent] == [503, 503, 503]
    waits = [b - a for (_, a), (_, b) in itertools.pairwise(sent)]
    assert all(1.0 <= wait < 4.0 for wait in waits), waits
    fake.revive()
    from serving.evaluator import evaluator_install

    evaluator_install(replace(evaluator, timeout=0.05))
    fake.delay = 1.0
    sent.clear()
    with pytest.raises(openai.InternalServerError) as raised:
        client.decisions.create(**DECISIONS_REQUEST)
    assert [status for status, _ in sent] == [504] and raised.value.code == "timeout"

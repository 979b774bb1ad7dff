"""The official `openai` SDK against the real server on the default embedded model: right answers to the README's
questions, the same probabilities as System One's, and a conversation with a tool call."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest
from django.conf import settings
from openai import BadRequestError, OpenAI
from openai.types import Decision

from api.decisions.openapi_examples import DECISIONS_REQUEST
from inference.gguf import DEFAULT_SOURCE
from serving.evaluator import evaluator_build, evaluator_install
from testbed.images import png_bytes
from testbed.live_server import LiveServer
from tests.conftest import README_REQUEST
from tests.embedded import bundled_backend

pytestmark = pytest.mark.embedded


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    """The default model, as `manage.py runserver` builds it, behind uvicorn on loopback."""
    with bundled_backend(source=DEFAULT_SOURCE) as backend:
        evaluator = evaluator_build(config=replace(settings.OPENJEV, backend="local"), backend=backend)
        evaluator_install(replace(evaluator, timeout=600.0))
        try:
            with LiveServer() as live:
                yield live
        finally:
            evaluator_install(None)


@pytest.fixture
def client(server: LiveServer) -> OpenAI:
    return OpenAI(base_url=f"{server.url}/v1", api_key="unused", timeout=600, max_retries=0)


def test_the_readme_questions_are_answered_right_through_the_sdk(server, client):
    raw = client.decisions.with_raw_response.create(**DECISIONS_REQUEST)
    decision = Decision.model_validate(raw.http_response.json(), strict=True)
    refund, team, anger = decision.answers
    assert refund.type == "predicate" and refund.probability > 0.8
    assert team.type == "choice" and team.choice == "Billing"
    assert anger.type == "score" and anger.score >= 1.0
    assert float(raw.headers["x-openjev-label-mass"]) >= 0.9
    systemone = httpx.post(f"{server.url}/v1/systemone", json=README_REQUEST, timeout=600).json()["answers"]
    assert refund.probability == pytest.approx(systemone["refund"]["noul"], abs=1e-6)
    assert [p.probability for p in team.probabilities] == pytest.approx(
        list(systemone["team"]["probabilities"].values()), abs=1e-6
    )
    assert anger.score == pytest.approx(systemone["anger"]["score"], abs=1e-6)


def test_a_tool_call_and_its_output_are_read_as_evidence(client):
    decision = client.decisions.create(
        model="jev-latest",
        input=[
            {"role": "user", "content": "Is my order 1234 delivered?"},
            {"type": "function_call", "call_id": "c1", "name": "order_status", "arguments": '{"order": 1234}'},
            {
                "type": "function_call_output",
                "call_id": "c1",
                "output": '{"order": 1234, "status": "delivered", "delivered_at": "2026-11-30"}',
            },
        ],
        questions=[
            {"type": "predicate", "instructions": "Does the tool output say the order was delivered?"},
            {
                "type": "choice",
                "instructions": "What did the user ask about?",
                "choices": [
                    {"value": "delivery", "description": "Where an order is"},
                    {"value": "refund", "description": "Getting money back"},
                    {"value": "password", "description": "Logging in"},
                ],
            },
        ],
    )
    delivered, topic = decision.answers
    assert delivered.type == "predicate" and delivered.probability > 0.5
    assert topic.type == "choice" and topic.choice == "delivery"


def test_an_image_in_a_questions_instructions_is_a_400_at_its_part_on_the_engine_that_cannot_see(client, settings):
    """The deployment takes images, the embedded engine cannot see them: the refusal names the instructions part, and
    the SDK raises it as a BadRequestError without a retry."""
    settings.OPENJEV = replace(settings.OPENJEV, max_images=3)
    png = base64.b64encode(png_bytes()).decode()
    instructions = [
        {"type": "input_text", "text": "Is this the company's logo?"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{png}"},
    ]
    with pytest.raises(BadRequestError) as raised:
        client.decisions.create(
            model="jev-latest",
            input="A receipt from the coffee shop.",
            questions=[
                {"type": "predicate", "instructions": "Is it a receipt?"},
                {"type": "predicate", "instructions": instructions},
            ],
        )
    error = raised.value.body
    assert isinstance(error, dict)
    assert (error["code"], error["param"]) == ("images_not_supported", "questions[1].instructions[1]")

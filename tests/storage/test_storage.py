"""Stored evaluations: what each level keeps, failures with their status, and that storage never
changes or delays an answer (SPEC section 6). Runs on SQLite and, with `-m postgres`, PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import math

import httpx
import pytest
from django.utils import timezone

from api.plumbing.bodies import Body
from api.plumbing.requestids import request_id_assign
from api.systemone.service import systemone_evaluate
from audit.models import Evaluation, EvaluationAnswer
from audit.storage import rows
from audit.storage import store as storing
from serving.evaluator import evaluator_install
from testbed.evaluators import fake_evaluator
from tests.api.helpers import close, expected_probabilities
from tests.conftest import README_REQUEST
from tests.database import db
from tests.stored import drained

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def evaluation_get(request_id: str) -> Evaluation:
    return Evaluation.objects.select_related("api_key").get(request_id=request_id)


def answers_of(request_id: str) -> list[EvaluationAnswer]:
    return list(EvaluationAnswer.objects.filter(evaluation__request_id=request_id).order_by("position"))


def server_timing(header: str) -> dict[str, float]:
    return {part.split(";")[0]: float(part.split("dur=")[1]) for part in header.split(", ")}


async def answered_and_stored(api: httpx.AsyncClient) -> tuple[httpx.Response, Evaluation, list[EvaluationAnswer]]:
    """The README request answered, then its stored row and answers once the writer has written them."""
    response = await api.post("/v1/systemone", json=README_REQUEST)
    assert response.status_code == 200
    await drained()
    request_id = response.headers["x-typesafe-request-id"]
    return response, await db(lambda: evaluation_get(request_id)), await db(lambda: answers_of(request_id))


async def test_an_answered_evaluation_is_stored_with_everything_the_client_got(api, fake, store):
    response, row, answers = await answered_and_stored(api)
    body = response.json()

    assert row.status_code == 200 and row.error_type == "" and row.error_message == ""
    assert row.requested_model == "jev-latest" and row.served_model == response.headers["x-openjev-model"]
    assert row.backend == "sglang" and row.api_key_label == "" and row.api_key is None
    assert row.store_level == "full"
    assert abs((timezone.now() - row.created_at).total_seconds()) < 30
    # State and questions exactly as sent, key order included (jsonb would reorder the options).
    assert row.state == README_REQUEST["state"]
    assert row.questions is not None and row.questions == README_REQUEST["questions"]
    assert list(row.questions) == ["refund", "team", "anger"]
    assert list(row.questions["team"]["criteria"]) == ["Billing", "Technical", "Sales"]
    assert row.question_count == 3 and row.question_types == "choice,noul,score"
    assert (row.input_tokens, row.output_tokens) == (body["usage"]["input_tokens"], body["usage"]["output_tokens"])
    assert row.prefix_tokens == int(response.headers["x-openjev-prefix-tokens"])
    assert row.cached_tokens == int(response.headers["x-openjev-cached-tokens"])
    timing = server_timing(response.headers["server-timing"])
    assert row.prepare_ms == pytest.approx(timing["prepare"], abs=0.01)
    assert row.prefill_ms == pytest.approx(timing["prefill"], abs=0.01)
    assert row.branches_ms == pytest.approx(timing["branches"], abs=0.01)
    assert row.total_ms is not None and row.prefill_ms is not None and row.branches_ms is not None
    assert row.total_ms >= row.prefill_ms + row.branches_ms

    assert [(a.position, a.question_id, a.type) for a in answers] == [
        (0, "refund", "noul"),
        (1, "team", "choice"),
        (2, "anger", "score"),
    ]
    refund, team, anger = answers
    sent = body["answers"]
    assert refund.noul == sent["refund"]["noul"] and refund.confidence is None
    assert refund.probabilities["true"] == sent["refund"]["noul"]
    assert math.isclose(refund.probabilities["true"] + refund.probabilities["false"], 1.0)
    assert team.choice == sent["team"]["choice"] and team.confidence == sent["team"]["confidence"]
    assert team.probabilities == sent["team"]["probabilities"] and team.option_keys == ["Billing", "Technical", "Sales"]
    assert anger.score == sent["anger"]["score"] and anger.confidence == sent["anger"]["confidence"]
    assert anger.probabilities == sent["anger"]["probabilities"] and anger.option_keys == ["0", "1", "2"]
    expected = expected_probabilities(fake, README_REQUEST)
    for answer in answers:
        assert close([answer.probabilities[k] for k in answer.option_keys], expected[answer.question_id])


async def test_per_question_results_can_be_queried_across_evaluations(api, fake, store):
    bodies = [README_REQUEST, {**README_REQUEST, "state": "All good, thanks!"}, {**README_REQUEST, "state": "Meh."}]
    responses = [await api.post("/v1/systemone", json=body) for body in bodies]
    await drained()
    confidences = {r.headers["x-typesafe-request-id"]: r.json()["answers"]["team"]["confidence"] for r in responses}
    threshold = sorted(confidences.values())[1] + 1e-12  # two of the three are under it

    def query() -> set[str]:
        return set(
            EvaluationAnswer.objects.filter(type="choice", question_id="team", confidence__lt=threshold).values_list(
                "evaluation__request_id", flat=True
            )
        )

    assert await db(query) == {rid for rid, c in confidences.items() if c < threshold}
    assert len(await db(query)) == 2


async def test_metadata_level_keeps_answers_and_figures_but_no_state_or_question_text(api, fake, store):
    store("metadata")
    response, row, answers = await answered_and_stored(api)
    request_id = row.request_id
    assert row.store_level == "metadata" and row.state is None and row.questions is None
    assert row.question_count == 3 and row.question_types == "choice,noul,score" and row.input_tokens
    assert [a.question_id for a in answers] == ["refund", "team", "anger"]
    assert answers[1].probabilities == response.json()["answers"]["team"]["probabilities"]
    raw = await db(lambda: list(Evaluation.objects.filter(request_id=request_id).values()))
    assert README_REQUEST["state"] not in repr(raw)
    assert "Which team should handle" not in repr(raw) + repr(answers)


async def test_off_level_stores_nothing(api, fake, store):
    store("off")
    response = await api.post("/v1/systemone", json=README_REQUEST)
    assert response.status_code == 200
    await drained()
    assert await db(lambda: Evaluation.objects.count()) == 0
    assert storing.storage_stats()["pending"] == 0


async def test_a_validation_failure_is_stored_as_422_with_its_problems(api, fake, store):
    response = await api.post("/v1/systemone", json={**README_REQUEST, "model": "gpt-4"})
    assert response.status_code == 422
    await drained()
    row = await db(lambda: Evaluation.objects.get())
    assert row.status_code == 422 and row.error_type == "validation_error"
    assert row.requested_model == "gpt-4" and "gpt-4" in row.error_message
    assert (row.served_model, row.backend) == ("Qwen/Qwen3.6-35B-A3B", "sglang")  # the running engine, not asked
    assert row.error_detail == response.json()["detail"]
    assert row.question_count == 3 and row.state == README_REQUEST["state"]
    assert await db(lambda: EvaluationAnswer.objects.count()) == 0


@pytest.mark.parametrize(
    "text, loc",
    [
        (
            '{"model": "jev-latest", "state": "Refund \\ud800", "questions": {"q\\udc00": {"type": "noul"}}}',
            ["body", "questions", "q\ufffd"],
        ),
        (
            '{"model": "jev-latest", "state": "x", '
            '"questions": {"q": {"type": "score", "criteria": ["a", {"v": 1e400}]}}}',
            ["body", "questions", "q", "criteria", 1, "v"],
        ),
    ],
)
async def test_input_no_text_or_number_can_hold_is_stored_as_the_422_the_client_got(api, fake, store, text, loc):
    response = await api.post("/v1/systemone", content=text.encode(), headers={"Content-Type": "application/json"})
    assert response.status_code == 422
    await drained()
    row = await db(lambda: evaluation_get(response.headers["x-typesafe-request-id"]))
    assert (row.status_code, row.error_type) == (422, "validation_error")
    assert row.error_detail == response.json()["detail"] and loc in [d["loc"] for d in row.error_detail]
    assert row.requested_model == "jev-latest" and row.question_count == 1 and row.questions is not None
    if "ud800" in text:  # no database driver encodes a lone surrogate: stored as U+FFFD, like a NUL
        assert row.state == "Refund \ufffd" and list(row.questions) == ["q\ufffd"]
    else:
        assert row.questions["q"]["criteria"][1]["v"] == math.inf


async def test_a_failed_request_stores_a_capped_state_and_questions_and_the_problems_the_client_got(api, fake, store):
    state = "word " * 350_000  # 1.75 MB of JSON
    options = {str(i): i for i in range(255)}  # every description a number: 255 problems per question
    body = {
        "model": "jev-latest",
        "state": state,
        "questions": {f"q{i}": {"type": "choice", "criteria": options} for i in range(64)},
    }
    response = await api.post("/v1/systemone", json=body)
    assert response.status_code == 422 and len(response.json()["detail"]) == 51  # 50, then how many more
    await drained()
    row = await db(lambda: evaluation_get(response.headers["x-typesafe-request-id"]))
    assert row.state is not None and row.questions is not None and row.error_detail is not None
    kept = row.state[rows.TRUNCATED_KEY]
    assert kept["json_chars"] == len(json.dumps(state)) and kept["head"] == json.dumps(state)[: rows.FAILED_JSON_MAX]
    assert row.questions[rows.TRUNCATED_KEY]["json_chars"] > rows.FAILED_JSON_MAX
    assert row.error_detail == response.json()["detail"]
    assert row.question_count == 64 and row.error_message


@pytest.mark.parametrize(
    "failure, status, error_type",
    [
        ("backend_status", 502, "backend_error"),
        ("dead", 503, "backend_unavailable"),
        ("timeout", 504, "timeout"),
        ("overloaded", 529, "overloaded"),
        ("budget", 422, "validation_error"),
    ],
)
async def test_failures_are_stored_with_the_status_the_client_got(api, fake, store, failure, status, error_type):
    if failure == "backend_status":
        fake.fail_status = 500
    elif failure == "dead":
        fake.dead()
    elif failure == "timeout":
        evaluator_install(fake_evaluator(fake, request_timeout=0.2))
        fake.delay = 5
    elif failure == "overloaded":
        evaluator_install(fake_evaluator(fake, max_concurrent_requests=0))
    else:
        evaluator_install(fake_evaluator(fake, max_input_tokens=50, max_total_input_tokens=100))
    response = await api.post("/v1/systemone", json=README_REQUEST)
    assert response.status_code == status
    await drained()
    row = await db(lambda: Evaluation.objects.get())
    assert (row.status_code, row.error_type) == (status, error_type)
    assert row.error_message and row.served_model == "Qwen/Qwen3.6-35B-A3B" and row.backend == "sglang"
    if status == 529:
        assert row.error_message == response.json()["detail"]["message"]
    elif status != 422:  # a fault: the client gets the generic message and the id, the row the cause
        client_message = response.json()["detail"]["message"]
        assert row.request_id in client_message and row.error_message not in client_message
    assert row.total_ms is not None and row.input_tokens is None


async def test_a_client_that_hangs_up_is_stored_as_499(evaluator, fake, store):
    fake.delay = 5
    request_id = request_id_assign(path="/v1/systemone")
    body = Body(data=README_REQUEST, size=0)
    task = asyncio.create_task(systemone_evaluate(body=body, request_id=request_id, caller=None))
    await asyncio.to_thread(fake.wait_in_flight, 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await drained()
    row = await db(lambda: evaluation_get(request_id))
    assert (row.status_code, row.error_type) == (499, "client_closed")

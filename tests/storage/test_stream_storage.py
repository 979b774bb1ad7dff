"""Every evaluation streamed over `WS /v1/systemone/stream` is stored like an HTTP one: the same row, the
same answers, the body without the socket's `id`, the key's label, and 499 when the client cancels it."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import httpx
import pytest
from websockets.asyncio.client import connect

from audit.keys import apikey_issue
from audit.models import Evaluation, EvaluationAnswer
from serving.evaluator import evaluator_install
from testbed.evaluators import fake_evaluator
from tests.conftest import README_REQUEST
from tests.database import db
from tests.stored import drained
from tests.stream.conftest import of, send, until_ended

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

COMPARED = (
    "status_code",
    "requested_model",
    "served_model",
    "backend",
    "api_key_label",
    "question_count",
    "question_types",
    "input_tokens",
    "output_tokens",
    "prefix_tokens",
    "state",
    "questions",
    "store_level",
)


def stored(request_id: str) -> tuple[Evaluation, list[tuple]]:
    row = Evaluation.objects.get(request_id=request_id)
    answers = list(
        EvaluationAnswer.objects.filter(evaluation=row)
        .order_by("position")
        .values_list("question_id", "type", "noul", "choice", "score", "probabilities", "label_mass")
    )
    return row, answers


async def test_a_streamed_evaluation_is_stored_exactly_like_the_same_request_over_http(asgi_server, store, settings):
    key = await db(lambda: apikey_issue(name="batch job"))
    settings.OPENJEV = replace(settings.OPENJEV, require_api_key=True)
    auth = {"Authorization": f"Bearer {key.secret}"}
    async with httpx.AsyncClient(base_url=asgi_server.url, headers=auth) as client:
        http = await client.post("/v1/systemone", json=README_REQUEST)
    async with connect(asgi_server.url.replace("http", "ws") + "/v1/systemone/stream") as ws:
        await send(ws, {"type": "auth", "api_key": key.secret})
        await send(ws, {"id": "job-1", **README_REQUEST})
        (done,) = of(await until_ended(ws, ["job-1"]), "job-1", "done")
    await drained()
    http_row, http_answers = await db(lambda: stored(http.headers["x-typesafe-request-id"]))
    ws_row, ws_answers = await db(lambda: stored(done["request_id"]))
    assert {f: getattr(ws_row, f) for f in COMPARED} == {f: getattr(http_row, f) for f in COMPARED}
    assert ws_answers == http_answers and len(ws_answers) == 3
    assert ws_row.api_key_label == key.label and ws_row.api_key_id == key.id
    assert ws_row.questions == README_REQUEST["questions"] and ws_row.state == README_REQUEST["state"]


async def test_a_cancelled_stream_evaluation_is_stored_as_499_cancelled(asgi_server, fake, store, branch_mode):
    evaluator_install(fake_evaluator(fake, branch_mode=branch_mode))
    fake.delay = 10
    async with connect(asgi_server.url.replace("http", "ws") + "/v1/systemone/stream") as ws:
        await send(ws, {"id": 9, **README_REQUEST})
        await asyncio.to_thread(fake.wait_in_flight, 1)
        await send(ws, {"type": "cancel", "id": 9})
        (cancelled,) = await until_ended(ws, [9])
    await drained()
    row = await db(lambda: Evaluation.objects.get(request_id=cancelled["request_id"]))
    assert (cancelled["status"], cancelled["detail"]["error_type"]) == (499, "cancelled")
    assert (row.status_code, row.error_type) == (499, "cancelled")
    assert row.error_message == cancelled["detail"]["message"] == "the evaluation was cancelled by the client"

"""The stream on the embedded engine: the real bundled Qwen2.5-Coder-0.5B (one thread) behind uvicorn. The
engine scores branches one by one, so answers leave one by one: a cancel sent on the first answer stops the
rest. The model is debiased (its measured default), so a question is answered early only once its prior is
cached: its first evaluation measures the prior at the end of the batch."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest
from django.conf import settings
from websockets.asyncio.client import connect

from inference.backends.llamacpp import LlamaCppBackend
from serving.evaluator import evaluator_build, evaluator_install
from testbed.live_server import LiveServer
from tests.embedded import SMALL, bundled_backend
from tests.stream.conftest import of, receive, send, until_ended, ws_url

pytestmark = pytest.mark.embedded

TOPICS = (
    "billing",
    "a refund",
    "a bug",
    "an outage",
    "pricing",
    "an upgrade",
    "a password",
    "shipping",
    "an invoice",
    "a contract",
)
BODY = {
    "model": "jev-latest",
    "state": "Hi, I was charged twice for March and the refund has not arrived.",
    "questions": {
        f"q{i}": {"type": "noul", "instructions": f"Is the ticket about {topic}?"} for i, topic in enumerate(TOPICS)
    },
}


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaCppBackend]:
    with bundled_backend(source=SMALL, n_ctx=8192, threads=1) as backend:
        yield backend


@pytest.fixture
def embedded_server(llama: LlamaCppBackend) -> Iterator[LiveServer]:
    evaluator = evaluator_build(config=replace(settings.OPENJEV, backend="local"), backend=llama)
    assert evaluator.priors is not None  # debiasing: the model's measured default
    evaluator_install(evaluator)
    with LiveServer() as server:
        yield server
    evaluator_install(None)


async def test_answers_leave_as_branches_finish_and_a_cancel_stops_the_remaining_branches(embedded_server):
    async with connect(ws_url(embedded_server)) as ws:
        await send(ws, {"id": "measures-priors", **BODY})
        first = await until_ended(ws, ["measures-priors"])
        assert [m["type"] for m in first] == ["answer"] * len(TOPICS) + ["done"]

        started = time.monotonic()
        await send(ws, {"id": "streamed", **BODY})
        streamed: list[dict[str, Any]] = []
        arrivals: list[int] = []
        while not streamed or streamed[-1]["type"] == "answer":
            streamed.append(await receive(ws))
            arrivals.append(round((time.monotonic() - started) * 1000))
        assert [m["question_id"] for m in of(streamed, "streamed", "answer")] == list(BODY["questions"])
        assert streamed[-1]["type"] == "done"

        await send(ws, {"id": "cancelled", **BODY})
        answer = await receive(ws)
        assert answer["type"] == "answer"
        await send(ws, {"type": "cancel", "id": "cancelled"})
        rest = await until_ended(ws, ["cancelled"])
    answered = 1 + len(of(rest, "cancelled", "answer"))
    assert rest[-1]["status"] == 499 and answered < len(TOPICS), (answered, arrivals)

    async with httpx.AsyncClient(base_url=embedded_server.url, timeout=600) as client:
        http = (await client.post("/v1/systemone", json=BODY)).json()
    assert {m["question_id"]: m["answer"] for m in of(streamed, "streamed", "answer")} == http["answers"]

"""An error quotes a client's value in at most 200 characters, on every route and over the WebSocket, and lists a
bounded number of problems, so its size does not grow with what the client sent: the review's 1 MB unknown field
came back as a 3 MB 400."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from api.decisions.openapi_examples import DECISIONS_REQUEST
from api.google.openapi import GOOGLE_REQUEST
from inference.errors import QUOTE_MAX_CHARACTERS
from tests.conftest import README_REQUEST
from tests.decisions.helpers import decision_with

HUGE = "x" * 1_000_000
ERROR_MAX_BYTES = 16 * 1024


def assert_small(text: str) -> None:
    assert len(text.encode()) < ERROR_MAX_BYTES, len(text)
    assert "x" * (QUOTE_MAX_CHARACTERS + 1) not in text  # no run of the client's value longer than a quote


CASES: dict[str, tuple[str, dict[str, Any], int]] = {
    "unknown field (decisions)": ("/v1/decisions", decision_with(**{HUGE: 1}), 400),
    "model (decisions)": ("/v1/decisions", decision_with(model=HUGE), 404),
    "question type (decisions)": ("/v1/decisions", decision_with(questions=[{"type": HUGE}]), 400),
    "role (decisions)": ("/v1/decisions", decision_with(input=[{"role": HUGE, "content": "x"}]), 400),
    "item type (decisions)": ("/v1/decisions", decision_with(input=[{"type": HUGE}]), 400),
    "call_id (decisions)": (
        "/v1/decisions",
        decision_with(input=[{"type": "function_call_output", "call_id": HUGE, "output": "x"}]),
        400,
    ),
    "model (systemone)": ("/v1/systemone", {**README_REQUEST, "model": HUGE}, 422),
    "question id and type (systemone)": ("/v1/systemone", {**README_REQUEST, "questions": {HUGE: {"type": HUGE}}}, 422),
    "content part type (decisions)": (
        "/v1/decisions",
        decision_with(input=[{"role": "user", "content": [{"type": HUGE}]}]),
        400,
    ),
    "content part type (systemone)": (
        "/v1/systemone",
        {**README_REQUEST, "state": [{"role": "user", "content": [{"type": HUGE}]}]},
        422,
    ),
    "role (systemone)": ("/v1/systemone", {**README_REQUEST, "state": [{"role": HUGE, "content": "x"}]}, 422),
    "model (classify)": ("/v1/classify", {"model": HUGE, "input": "x"}, 404),
    "every option invalid (systemone)": (
        "/v1/systemone",
        {
            **README_REQUEST,
            "questions": {
                f"q{i}{'x' * 150}": {"type": "choice", "criteria": {f"o{j}": 1 for j in range(255)}} for i in range(64)
            },
        },
        422,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_an_error_quotes_a_huge_client_value_in_a_few_characters(api, case):
    path, body, status = CASES[case]
    response = await api.post(path, content=json.dumps(body), headers={"Content-Type": "application/json"})
    assert response.status_code == status, response.text[:500]
    assert_small(response.text)


async def test_a_422_lists_fifty_problems_and_says_how_many_more(api):
    path, body, _ = CASES["every option invalid (systemone)"]
    detail = (await api.post(path, json=body)).json()["detail"]
    assert len(detail) == 51
    assert detail[-1] == {
        "loc": ["body"],
        "msg": f"and {64 * 255 - 50} more problems of the same request",
        "type": "more_problems",
    }


async def test_a_route_that_does_not_exist_quotes_its_path_in_a_few_characters(api):
    response = await api.get("/v1/" + "y" * 20_000)
    assert response.status_code == 404
    assert len(response.text) < 1_000


async def test_the_stream_quotes_a_huge_message_type_and_echoes_no_huge_id(asgi_server):
    from websockets.asyncio.client import connect

    url = asgi_server.url.replace("http://", "ws://") + "/v1/systemone/stream"
    async with connect(url, max_size=None) as socket:
        await socket.send(json.dumps({"type": HUGE, "id": HUGE}))
        reply = await socket.recv()
    assert_small(str(reply))
    assert json.loads(reply)["id"] is None


@pytest.mark.django_db(transaction=True)
async def test_a_stored_failure_quotes_a_huge_value_in_a_few_characters(api, store):
    from audit.models import Evaluation
    from audit.storage.writer import writer_stop

    response = await api.post("/v1/systemone", json={**README_REQUEST, "questions": {HUGE: {"type": HUGE}}})
    assert response.status_code == 422
    assert writer_stop(timeout=30)
    row = await Evaluation.objects.aget(request_id=response.headers["x-typesafe-request-id"])
    assert len(row.error_message) < 2_000 and "x" * (QUOTE_MAX_CHARACTERS + 1) not in row.error_message


Path = tuple[str | int, ...]


def swapped(value: Any) -> Iterator[tuple[Path, Any]]:
    """Every copy of `value` with one of its scalars or one of its keys replaced by a megabyte of text, and where."""
    if isinstance(value, dict):
        for key, item in value.items():
            renamed = {(HUGE if k == key else k): v for k, v in value.items()}
            yield (key, "(key)"), renamed
            for path, changed in swapped(item):
                yield (key, *path), {**value, key: changed}
    elif isinstance(value, list):
        for i, item in enumerate(value):
            for path, changed in swapped(item):
                yield (i, *path), [*value[:i], changed, *value[i + 1 :]]
    else:
        yield (), HUGE


EXAMPLES = {
    "/v1/systemone": README_REQUEST,
    "/v1/decisions": DECISIONS_REQUEST,
    "/v1/decisions (google)": GOOGLE_REQUEST,
    "/v1/classify": {"model": "sentiment", "input": "great", "labels": ["positive", "negative"]},
    "/v1/feedback": {"request_id": "req_0", "question_id": "refund", "label": True},
}


@pytest.mark.parametrize("route", list(EXAMPLES))
async def test_no_value_is_echoed_whole_wherever_it_stands_in_any_routes_body(api, fake, route):
    """Each scalar and each key of each route's documented example, one at a time, a megabyte long: whatever the
    answer (a 4xx for most, a 200 where a long text is valid), it never carries the value back whole."""
    path = route.split(" ")[0]
    for where, body in swapped(copy.deepcopy(EXAMPLES[route])):
        response = await api.post(path, content=json.dumps(body), headers={"Content-Type": "application/json"})
        assert response.status_code < 500, (where, response.text[:300])
        if response.status_code != 200:
            assert_small(response.text)

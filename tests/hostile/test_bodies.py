"""Large bodies are read in a lane of their own, off the event loop, and every shape of body costs its parser time
linear in its size: the review's 60,000-message transcripts, 60,000-item inputs, 150,000 lone surrogates and
100,000-key states each held the loop for hundreds of milliseconds."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from dataclasses import replace
from typing import Any

import pytest

from api.checking.checker import Checker, conversation_check
from api.checking.json_body import body_parse, document_problems
from api.checking.limits import limits_configured
from api.decisions.parsing import decisions_request_parse
from api.decisions.service import decisions_limits
from api.plumbing import body_lane_places
from api.plumbing.body_lane import OFF_LOOP_BYTES
from api.systemone.parsing import systemone_request_parse
from inference.errors import RequestInvalid
from tests.conftest import README_REQUEST
from tests.linear import assert_linear, cost_growth

MODELS = frozenset({"jev-latest"})
QUESTIONS = {"q": {"type": "noul", "instructions": "x"}}


def systemone_work(state_of_size):
    """Parse and validate a System One body whose state `state_of_size(n)` builds, as the view does."""

    def work(n: int):
        raw = json.dumps({"model": "jev-latest", "questions": QUESTIONS, "state": state_of_size(n)}).encode()

        def run() -> None:
            with contextlib.suppress(RequestInvalid):
                systemone_request_parse(data=body_parse(raw), limits=limits_configured(), models=MODELS)

        return run

    return work


def test_a_transcript_of_many_messages_costs_linear_time():
    assert_linear(systemone_work(lambda n: [{"role": "user", "content": "a"}] * n), size=2_000)


def test_a_transcript_of_unknown_roles_costs_linear_time():
    assert_linear(systemone_work(lambda n: [{"role": "x" * 50, "content": "a"}] * n), size=2_000)


def test_a_state_object_of_many_keys_costs_linear_time():
    assert_linear(systemone_work(lambda n: {f"k{i}": i for i in range(n)}), size=2_000)


def test_many_lone_surrogates_cost_linear_time():
    assert_linear(lambda n: lambda: document_problems(data=["\ud800"] * n), size=2_000)
    assert_linear(systemone_work(lambda n: ["\ud800"] * n), size=2_000)


def test_deep_nesting_costs_linear_time():
    def nested(n: int) -> Any:
        value: Any = "x"
        for _ in range(min(n, 120)):
            value = [value]
        return [value] * (n // 120 + 1)

    assert_linear(systemone_work(nested), size=2_000)


def decisions_work(body_of_size):
    def work(n: int):
        raw = json.dumps(body_of_size(n)).encode()

        def run() -> None:
            with contextlib.suppress(RequestInvalid):
                decisions_request_parse(data=body_parse(raw), limits=decisions_limits(), models=MODELS)

        return run

    return work


def test_an_openai_input_of_many_items_costs_linear_time():
    assert_linear(
        decisions_work(
            lambda n: {
                "model": "jev-latest",
                "input": [{"role": "user", "content": "a"}] * n,
                "questions": [{"type": "predicate", "instructions": "x"}],
            }
        ),
        size=2_000,
    )


def test_many_unknown_fields_cost_linear_time():
    assert_linear(
        decisions_work(lambda n: {f"x{i}": 1 for i in range(n)} | {"model": "jev-latest", "input": "x"}), size=2_000
    )


def test_input_json_of_many_values_costs_linear_time():
    assert_linear(
        decisions_work(
            lambda n: {
                "model": "jev-latest",
                "input": [{"role": "user", "content": [{"type": "input_json", "data": {"v": list(range(n))}}]}],
                "questions": [{"type": "predicate", "instructions": "x"}],
            }
        ),
        size=2_000,
    )


def parse_threads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The threads System One bodies are validated in, from now on."""
    threads: list[str] = []
    from api.systemone import service

    parse = service.systemone_request_parse

    def recorded(**kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return parse(**kwargs)

    monkeypatch.setattr(service, "systemone_request_parse", recorded)
    return threads


async def test_a_large_body_is_read_in_the_lane_and_a_small_one_in_place(api, monkeypatch):
    threads = parse_threads(monkeypatch)
    small = await api.post("/v1/systemone", json=README_REQUEST)
    large = await api.post("/v1/systemone", json={**README_REQUEST, "state": "x" * OFF_LOOP_BYTES})
    assert small.status_code == 200 and large.status_code == 200, large.text
    assert threads[0] == threading.current_thread().name  # the event loop's
    assert threads[1].startswith("openjev-body-lane")


async def test_a_large_stream_message_is_read_in_the_lane(asgi_server, monkeypatch):
    from websockets.asyncio.client import connect

    threads = parse_threads(monkeypatch)
    url = asgi_server.url.replace("http://", "ws://") + "/v1/systemone/stream"
    async with connect(url, max_size=None) as socket:
        await socket.send(json.dumps({"id": 1, **README_REQUEST, "state": "x" * OFF_LOOP_BYTES}))
        while json.loads(await socket.recv())["type"] not in ("done", "error"):
            pass
    assert threads and threads[0].startswith("openjev-body-lane")


async def test_a_large_body_waits_unread_for_a_full_lane_and_is_refused_529_after_the_body_timeout(
    api, monkeypatch, settings
):
    settings.OPENJEV = replace(settings.OPENJEV, body_timeout=0.3)
    monkeypatch.setitem(body_lane_places._counts, "bodies", settings.OPENJEV.max_concurrent_requests)
    started = time.monotonic()
    response = await api.post("/v1/systemone", json={**README_REQUEST, "state": "x" * OFF_LOOP_BYTES})
    assert response.status_code == 529, response.text
    assert time.monotonic() - started >= 0.3
    small = await api.post("/v1/systemone", json=README_REQUEST)
    assert small.status_code == 200


async def test_the_lane_reads_a_body_with_its_request_id(api, monkeypatch):
    """Logs and errors raised while a body is read in the lane quote the request's id, as on the loop."""
    from api.plumbing.requestids import request_id_current
    from api.systemone import service

    seen: list[tuple[str, str | None]] = []
    parse = service.systemone_request_parse

    def recorded(**kwargs: Any) -> Any:
        seen.append((threading.current_thread().name, request_id_current()))
        return parse(**kwargs)

    monkeypatch.setattr(service, "systemone_request_parse", recorded)
    response = await api.post("/v1/systemone", json={**README_REQUEST, "state": "x" * OFF_LOOP_BYTES})
    [(thread, request_id)] = seen
    assert thread.startswith("openjev-body-lane") and request_id == response.headers["x-typesafe-request-id"]


async def test_many_unknown_fields_are_named_fifty_at_a_time_and_counted(api):
    """The review's lane flood: 150,000 unknown fields were 150,000 problems built (a second of CPU a body); the
    first fifty are named and the rest counted in one more."""
    body: dict[str, Any] = {
        "model": "jev-latest",
        "input": "x",
        "questions": [{"type": "predicate", "instructions": "x"}],
    }
    body |= {f"u{i:06d}": 1 for i in range(150_000)}
    response = await api.post("/v1/decisions", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["message"].endswith("; and 31 more")  # 20 named: 51 problems in all
    check = Checker()
    check.unknown_keys(body, {"model", "input", "questions"}, (), message=lambda key: key, type_="unknown")
    assert len(check.problems) == 51 and check.problems[-1].msg == "and 149950 more unknown fields"


def test_a_conversation_of_more_messages_than_the_budget_has_tokens_is_refused_unread(settings):
    """Every chat template spends at least a token on a message, so a transcript of more messages than the input
    budget has tokens cannot fit: refused before any message is checked, at a cost that does not grow with it."""
    limit = settings.OPENJEV.max_input_tokens

    def work(n: int):
        state = [{"role": "user", "content": "a"}] * (limit + n)

        def run() -> None:
            check = Checker()
            assert conversation_check(check, state) == ()
            assert [p.type for p in check.problems] == ["token_limit"]

        return run

    assert cost_growth(work, size=10_000, factor=8) < 3

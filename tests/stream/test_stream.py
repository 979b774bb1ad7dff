"""`WS /v1/systemone/stream` end to end: a real `websockets` client, the app under uvicorn on loopback, the
fake SGLang behind it (through a proxy holding chosen branches where the timing of an answer matters)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import httpx
import pytest
from django.conf import settings
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from api.systemone.parsing import Limits, systemone_request_parse
from inference.prompts import plan_compile
from inference.runner import Evaluator
from serving.evaluator import evaluator_install
from testbed.evaluators import fake_evaluator, url_evaluator
from testbed.live_server import LiveServer
from tests.conftest import README_REQUEST
from tests.holding_proxy import ends_with, holding_proxy
from tests.stream.conftest import of, receive, send, until_ended, ws_url

KEY = "sk-stream-test-key-0123456789"


async def test_answers_then_done_carry_what_the_http_answer_carries(asgi_server, stream_url):
    async with httpx.AsyncClient(base_url=asgi_server.url) as client:
        http = (await client.post("/v1/systemone", json=README_REQUEST)).json()
    async with connect(stream_url) as ws:
        await send(ws, {"id": "readme", **README_REQUEST})
        messages = await until_ended(ws, ["readme"])
    answers = {m["question_id"]: m["answer"] for m in of(messages, "readme", "answer")}
    assert answers == http["answers"] and list(answers) == list(README_REQUEST["questions"])
    (done,) = of(messages, "readme", "done")
    assert done["usage"] == http["usage"] and done["request_id"].startswith("req_")
    assert messages[-1] is done


async def test_a_batch_job_pipelines_many_evaluations_over_one_socket(stream_url, fake):
    fake.delay = 0.05
    ids = [*range(6), "seven", "eight"]
    async with connect(stream_url) as ws:
        for eid in ids:
            await send(ws, {"id": eid, **README_REQUEST, "state": f"Ticket {eid}: refund my double charge."})
        messages = await until_ended(ws, ids)
    for eid in ids:
        assert [m["type"] for m in of(messages, eid)] == ["answer"] * 3 + ["done"]
    assert fake.max_in_flight > 1  # they really ran at the same time
    assert len({m["request_id"] for m in messages if m["type"] == "done"}) == len(ids)


async def test_in_parallel_branch_mode_an_answer_arrives_while_another_branch_is_unanswered(
    fake, evaluator, asgi_server
):
    held = {"type": "noul", "instructions": "Is the customer asking for money back before Friday?"}
    body = {**README_REQUEST, "questions": {**README_REQUEST["questions"], "held": held}}
    with holding_proxy(upstream=fake.url, hold=ends_with(branch_suffix(evaluator, body, "held"))) as (proxy, url):
        evaluator_install(url_evaluator(url, branch_mode="parallel"))
        async with connect(ws_url(asgi_server)) as ws:
            await send(ws, {"id": 1, **body})
            await asyncio.to_thread(proxy.wait_held, 1)
            early = [await receive(ws) for _ in range(3)]
            assert sorted(m["question_id"] for m in early) == ["anger", "refund", "team"]
            proxy.release()
            rest = await until_ended(ws, [1])
    assert [m["type"] for m in rest] == ["answer", "done"] and rest[0]["question_id"] == "held"


def branch_suffix(evaluator: Evaluator, body: dict[str, Any], question_id: str) -> tuple[int, ...]:
    """The token ids that end the branch of `question_id` in the plan `evaluator` compiles for `body`."""
    request = systemone_request_parse(
        data=body, limits=Limits(64, 255), models=settings.OPENJEV.language_model_names
    ).evaluation
    plan = plan_compile(
        conversation=request.conversation,
        questions=request.questions,
        tokenizer=evaluator.backend.tokenizer(),
        labels=evaluator.labels,
        budget=evaluator.budget,
    )
    return next(b.suffix_ids for b in plan.branches if b.question.id == question_id)


@pytest.fixture
def key_required(settings):
    settings.OPENJEV = replace(settings.OPENJEV, api_key=KEY)


async def closed_with(ws) -> tuple[int, str]:
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            await ws.recv()
    assert closed.value.rcvd is not None
    return closed.value.rcvd.code, closed.value.rcvd.reason


async def test_the_key_is_accepted_on_the_upgrade_or_as_the_first_message(stream_url, key_required):
    async with connect(stream_url, additional_headers={"Authorization": f"Bearer {KEY}"}) as ws:
        await send(ws, {"id": "header", **README_REQUEST})
        assert of(await until_ended(ws, ["header"]), "header", "done")
    async with connect(stream_url) as ws:  # a browser cannot set headers on a WebSocket
        await send(ws, {"type": "auth", "api_key": KEY})
        await send(ws, {"id": "message", **README_REQUEST})
        assert of(await until_ended(ws, ["message"]), "message", "done")


@pytest.mark.parametrize(
    ("headers", "first", "reason"),
    [
        ({}, {"id": 1, **README_REQUEST}, "authenticate first"),
        ({"Authorization": "Bearer wrong-key"}, None, "invalid API key"),
        ({}, {"type": "auth", "api_key": "wrong-key"}, "invalid API key"),
        ({}, {"type": "auth"}, "needs an api_key"),
    ],
)
async def test_a_missing_or_wrong_key_closes_the_socket_with_4401_and_a_reason(
    stream_url, key_required, headers, first, reason
):
    async with connect(stream_url, additional_headers=headers) as ws:
        if first is not None:
            await send(ws, first)
        code, said = await closed_with(ws)
    assert code == 4401 and reason in said


async def test_over_the_admission_limit_an_evaluation_gets_529_at_once_never_a_queue(stream_url, fake):
    evaluator_install(fake_evaluator(fake, max_concurrent_requests=1))
    fake.delay = 0.5
    async with connect(stream_url) as ws:
        await send(ws, {"id": "first", **README_REQUEST})
        await asyncio.to_thread(fake.wait_in_flight, 1)
        await send(ws, {"id": "second", **README_REQUEST})
        refused = await receive(ws)
        assert refused["type"] == "error" and refused["id"] == "second" and refused["status"] == 529
        assert refused["detail"]["error_type"] == "overloaded"
        assert of(await until_ended(ws, ["first"]), "first", "done")


async def test_a_message_that_cannot_be_read_gets_an_error_and_the_socket_stays_open(stream_url, settings):
    settings.OPENJEV = replace(settings.OPENJEV, max_body_bytes=4096)
    async with connect(stream_url) as ws:
        for bad, status, text in [
            ("not json", 400, "not JSON"),
            ("[1, 2]", 400, "JSON object"),
            ('{"id": 1, "state": "' + "x" * 5000 + '"}', 413, "over 4096 bytes"),
            ('{"id": "\\ud800", "type": "evaluate"}', 422, "lone UTF-16 surrogate"),
        ]:
            await ws.send(bad)
            error = await receive(ws)
            assert (error["type"], error["id"], error["status"]) == ("error", None, status), error
            assert text in str(error["detail"])
        await send(ws, {"type": "subscribe", "id": 7})
        unknown = await receive(ws)
        assert (unknown["id"], unknown["status"], unknown["detail"]["error_type"]) == (7, 400, "invalid_request")
        await send(ws, README_REQUEST)
        missing = await receive(ws)
        assert missing["detail"] == [{"loc": ["body", "id"], "msg": "Field required", "type": "missing"}]
        await send(ws, {"id": "still-open", **README_REQUEST})
        assert of(await until_ended(ws, ["still-open"]), "still-open", "done")


async def test_an_invalid_body_gets_the_same_422_detail_as_over_http(asgi_server, stream_url):
    body = {**README_REQUEST, "model": "gpt-4", "questions": {"q": {"type": "noul"}}}
    async with httpx.AsyncClient(base_url=asgi_server.url) as client:
        http = await client.post("/v1/systemone", json=body)
    async with connect(stream_url) as ws:
        await send(ws, {"id": "bad", **body})
        (error,) = await until_ended(ws, ["bad"])
    assert (error["status"], error["detail"]) == (422, http.json()["detail"])


async def test_per_socket_limits_duplicate_ids_and_idle_sockets(stream_url, fake, settings):
    settings.OPENJEV = replace(settings.OPENJEV, stream_max_in_flight=2, stream_idle_timeout=0.5)
    fake.delay = 0.3
    async with connect(stream_url) as ws:
        for eid in ("a", "b", "a", "c"):
            await send(ws, {"id": eid, **README_REQUEST})
        messages = await until_ended(ws, ["a", "b", "a", "c"])
        assert [m["status"] for m in messages if m["type"] == "error"] == [409, 429]
        assert of(messages, "c", "error")[0]["detail"]["error_type"] == "too_many_in_flight"
        assert {m["id"] for m in messages if m["type"] == "done"} == {"a", "b"}
        code, reason = await closed_with(ws)
    assert (code, reason) == (4408, "idle for 0.5 s")


async def test_cancel_aborts_the_evaluation_on_the_backend_and_says_so(stream_url, fake):
    fake.delay = 10
    async with connect(stream_url) as ws:
        await send(ws, {"id": 3, **README_REQUEST})
        await asyncio.to_thread(fake.wait_in_flight, 1)
        await send(ws, {"type": "cancel", "id": 3})
        (cancelled,) = await until_ended(ws, [3])
        await asyncio.to_thread(fake.wait_idle, 2)  # the backend call was dropped, long before its 10 s
        await send(ws, {"type": "cancel", "id": 3})  # already over: ignored, nothing is sent
        await send(ws, {"id": 4, **README_REQUEST, "model": "nope"})
        assert (await receive(ws))["id"] == 4
    assert cancelled["status"] == 499 and cancelled["detail"]["error_type"] == "cancelled"
    assert fake.disconnected


async def test_a_socket_that_closes_mid_evaluation_aborts_it_on_the_backend(stream_url, fake):
    fake.delay = 10
    async with connect(stream_url) as ws:
        await send(ws, {"id": 1, **README_REQUEST})
        await asyncio.to_thread(fake.wait_in_flight, 1)
    await asyncio.to_thread(fake.wait_idle, 2)
    assert fake.disconnected


async def test_the_stream_follows_the_asgi_root_path(evaluator):
    """As uvicorn --root-path /jev passes a request a gateway forwarded without its prefix."""
    from openjev_site.asgi import application

    async def mounted(scope, receive, send):
        await application({**scope, "root_path": "/jev", "path": "/jev" + scope["path"]}, receive, send)

    with LiveServer(mounted) as server:
        async with connect(ws_url(server)) as ws:
            await send(ws, {"id": 1, **README_REQUEST})
            assert of(await until_ended(ws, [1]), 1, "done")


async def test_the_stream_follows_a_forced_script_name_and_unknown_paths_are_closed_with_4404(asgi_server, settings):
    settings.FORCE_SCRIPT_NAME = "/jev"
    async with connect(ws_url(asgi_server, "/jev/v1/systemone/stream")) as ws:
        await send(ws, {"id": 1, **README_REQUEST})
        assert of(await until_ended(ws, [1]), 1, "done")
    async with connect(ws_url(asgi_server, "/v1/systemone/streams")) as ws:
        assert await closed_with(ws) == (4404, "no WebSocket route for /v1/systemone/streams")


async def test_a_socket_that_does_not_authenticate_in_time_is_closed_with_4401_whatever_it_sends(
    stream_url, key_required, settings
):
    settings.OPENJEV = replace(settings.OPENJEV, stream_auth_timeout=0.5)
    loop = asyncio.get_running_loop()
    async with connect(stream_url) as ws:
        opened = loop.time()
        for _ in range(3):  # unreadable messages are answered, but do not extend the deadline
            await ws.send("not json")
            assert (await receive(ws))["status"] == 400
            await asyncio.sleep(0.1)
        code, reason = await closed_with(ws)
    assert (code, reason) == (4401, "not authenticated within 0.5 s of opening")
    assert 0.4 < loop.time() - opened < 3  # counted from the accept, just before the client sees it
    async with connect(stream_url) as ws:  # authenticated in time: the deadline is over for this socket
        await send(ws, {"type": "auth", "api_key": KEY})
        await asyncio.sleep(0.8)
        await send(ws, {"id": "late", **README_REQUEST})
        assert of(await until_ended(ws, ["late"]), "late", "done")


async def test_with_auth_off_no_authentication_deadline_applies(stream_url, settings):
    settings.OPENJEV = replace(settings.OPENJEV, stream_auth_timeout=0.2)
    async with connect(stream_url) as ws:
        await asyncio.sleep(0.5)
        await send(ws, {"id": 1, **README_REQUEST})
        assert of(await until_ended(ws, [1]), 1, "done")


async def test_over_the_per_process_cap_a_socket_is_closed_with_4529_until_one_closes(stream_url, settings):
    settings.OPENJEV = replace(settings.OPENJEV, max_websockets=2)
    async with connect(stream_url) as first, connect(stream_url):
        async with connect(stream_url) as refused:
            assert await closed_with(refused) == (4529, "this server process has 2 WebSockets open; retry later")
        await send(first, {"id": 1, **README_REQUEST})  # those open are served as before
        assert of(await until_ended(first, [1]), 1, "done")
    for _ in range(50):  # a socket is counted out once its consumer has returned, just after the close
        if await evaluates(stream_url):
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail("closing sockets did not make room for a new one")


async def evaluates(url: str) -> bool:
    """Whether a new socket at `url` is served (not refused by the cap)."""
    async with connect(url) as ws:
        try:
            await send(ws, {"id": 1, **README_REQUEST})
            return bool(of(await until_ended(ws, [1]), 1, "done"))
        except ConnectionClosed:
            return False


@pytest.mark.parametrize("eid", [2**53 - 1, -(2**53 - 1), 0])
async def test_integer_ids_that_javascript_holds_exactly_are_accepted(stream_url, eid):
    async with connect(stream_url) as ws:
        await send(ws, {"id": eid, **README_REQUEST})
        assert of(await until_ended(ws, [eid]), eid, "done")


@pytest.mark.parametrize("eid", [2**53, -(2**53), 10**40])
async def test_integer_ids_beyond_what_javascript_holds_exactly_are_refused(stream_url, eid):
    async with connect(stream_url) as ws:
        await send(ws, {"id": eid, **README_REQUEST})
        refused = await receive(ws)
        await send(ws, {"type": "cancel", "id": eid})
        cancel_refused = await receive(ws)
    for error in (refused, cancel_refused):
        assert (error["type"], error["id"], error["status"]) == ("error", None, 422)
        ((problem),) = error["detail"]
        assert problem["loc"] == ["body", "id"] and problem["type"] == "int_range"
        assert "9007199254740991" in problem["msg"]


async def test_a_binary_frame_gets_a_415_error_and_the_socket_stays_open(stream_url):
    async with connect(stream_url) as ws:
        await ws.send(json.dumps({"id": "binary", **README_REQUEST}).encode())
        error = await receive(ws)
        assert (error["type"], error["id"], error["status"]) == ("error", None, 415)
        assert error["detail"]["error_type"] == "unsupported_media_type" and "text frame" in error["detail"]["message"]
        await send(ws, {"id": "text", **README_REQUEST})
        assert of(await until_ended(ws, ["text"]), "text", "done")

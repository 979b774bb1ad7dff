"""Per-key limits on every evaluating route: requests and input tokens per minute and evaluations in flight,
per issued key or per client address without keys, in this process or shared through a real Redis; 429s
in each route's own shape with the headers the SDKs retry by; Redis down; wrong keys from one address."""

from __future__ import annotations

import asyncio
import logging
import os
import uuid

import httpx
import pytest

from api.decisions.openapi_examples import DECISIONS_REQUEST
from audit.keys import apikey_issue
from audit.models import ApiKey
from testbed.live_server import LiveServer
from tests.conftest import README_REQUEST
from tests.database import db
from tests.ops.helpers import Serve, serve_env
from tests.ratelimits.conftest import assert_limited


async def test_without_keys_each_client_address_gets_the_default_requests_per_minute(api, fake, limit):
    limit(key_requests_per_minute=2)
    first = [await api.post("/v1/systemone", json=README_REQUEST) for _ in range(2)]
    calls = fake.generate_calls
    refused = await api.post("/v1/systemone", json=README_REQUEST)
    assert [r.status_code for r in first] == [200, 200]
    assert_limited(refused)
    assert refused.json()["detail"]["error_type"] == "rate_limited"
    assert fake.generate_calls == calls  # refused before any backend work


async def test_a_limited_call_is_refused_in_each_routes_own_shape(api, fake, limit):
    limit(key_requests_per_minute=1)
    assert (await api.post("/v1/decisions", json=DECISIONS_REQUEST)).status_code == 200
    decision = await api.post("/v1/decisions", json=DECISIONS_REQUEST)
    assert_limited(decision)
    assert decision.json()["error"]["type"] == "rate_limit_error"
    assert decision.json()["error"]["code"] == "rate_limit_exceeded"
    assert decision.headers["x-should-retry"] == "true"
    systemone = await api.post("/v1/systemone", json=README_REQUEST)
    assert_limited(systemone)


async def test_input_tokens_per_minute_admit_a_request_only_while_its_tokens_fit(api, fake, limit):
    limit(key_tokens_per_minute=1_000)
    first = await api.post("/v1/systemone", json=README_REQUEST)
    read = first.json()["usage"]["input_tokens"]
    assert first.status_code == 200 and 1_000 // 3 < read <= 1_000 // 2  # two fit, a third does not
    second = await api.post("/v1/systemone", json=README_REQUEST)
    calls = fake.generate_calls
    third = await api.post("/v1/systemone", json=README_REQUEST)
    assert second.status_code == 200
    assert_limited(third, counted="tokens")
    assert fake.generate_calls == calls  # refused before any backend work


async def test_evaluations_in_flight_are_limited_per_caller(api, fake, limit):
    limit(key_concurrency=1)
    fake.delay = 0.5
    slow = asyncio.create_task(api.post("/v1/systemone", json=README_REQUEST))
    await asyncio.sleep(0.2)
    refused = await api.post("/v1/systemone", json=README_REQUEST)
    assert_limited(refused, counted=None)
    assert (await slow).status_code == 200
    fake.delay = 0.0
    assert (await api.post("/v1/systemone", json=README_REQUEST)).status_code == 200


async def test_unset_limits_count_nothing(api, fake, limit, monkeypatch):
    from api.plumbing import ratelimits

    def counted() -> None:
        raise AssertionError("no limit is set, so nothing may be counted")

    monkeypatch.setattr(ratelimits, "loop_counters", counted)
    assert (await api.post("/v1/systemone", json=README_REQUEST)).status_code == 200


@pytest.mark.servers
def test_two_processes_share_the_counts_through_redis(fake, redis_counts, tmp_path):
    """Two `manage.py serve` processes on one Redis, as two replicas run: a limit of 3 requests a minute is
    counted once over both, whichever process each request reaches."""
    env = serve_env(OPENJEV_REDIS_URL=redis_counts, OPENJEV_KEY_REQUESTS_PER_MINUTE="3")
    with (
        Serve(["--connect", fake.url], log=tmp_path / "one.log", env=env) as one,
        Serve(["--connect", fake.url], log=tmp_path / "two.log", env=env) as two,
    ):
        pids = {one.wait_healthy().json()["worker_pid"], two.wait_healthy().json()["worker_pid"]}
        responses = [
            httpx.post(f"{server.url}/v1/systemone", json=README_REQUEST, timeout=30) for server in (one, two, one, two)
        ]
        assert [r.status_code for r in responses] == [200, 200, 200, 429], [r.text for r in responses]
        assert_limited(responses[-1])
        assert one.terminate() == 0 and two.terminate() == 0
    assert len(pids) == 2 and os.getpid() not in pids


def test_redis_down_serves_unlimited_when_open_and_429_when_closed(evaluator, fake, limit, caplog):
    limit(key_requests_per_minute=1, redis_url="redis://127.0.0.1:1/0")
    with LiveServer() as server, caplog.at_level(logging.WARNING, logger="api.plumbing.ratelimits_store"):
        opened = [httpx.post(f"{server.url}/v1/systemone", json=README_REQUEST, timeout=30) for _ in range(3)]
        limit(key_requests_per_minute=1, redis_url="redis://127.0.0.1:1/0", rate_limit_failure="closed")
        closed = httpx.post(f"{server.url}/v1/decisions", json=DECISIONS_REQUEST, timeout=30)
    assert [r.status_code for r in opened] == [200, 200, 200]
    assert closed.status_code == 429 and closed.json()["error"]["code"] == "rate_limits_unavailable"
    assert closed.headers["retry-after"] == "5"
    assert len([r for r in caplog.records if "cannot be counted" in r.getMessage()]) == 1


@pytest.mark.django_db(transaction=True)
async def test_a_keys_own_limits_win_and_other_keys_keep_theirs(api, fake, settings, limit):
    limit(require_api_key=True, key_requests_per_minute=5)
    name = uuid.uuid4().hex[:8]
    tight = await db(lambda: apikey_issue(name=f"tight-{name}"))
    roomy = await db(lambda: apikey_issue(name=f"roomy-{name}"))
    await db(lambda: ApiKey.objects.filter(pk=tight.id).update(requests_per_minute=1))

    async def send(secret: str) -> int:
        response = await api.post("/v1/systemone", json=README_REQUEST, headers={"Authorization": f"Bearer {secret}"})
        return response.status_code

    assert [await send(tight.secret) for _ in range(3)] == [200, 429, 429]
    assert [await send(roomy.secret) for _ in range(3)] == [200, 200, 200]


@pytest.mark.django_db(transaction=True)
async def test_an_address_sending_wrong_keys_gets_429_before_any_key_lookup(api, fake, limit, monkeypatch):
    limit(require_api_key=True, bad_keys_per_minute=3)
    good = await db(lambda: apikey_issue(name=f"good-{uuid.uuid4().hex[:8]}"))
    wrong = [
        await api.post(
            "/v1/systemone", json=README_REQUEST, headers={"Authorization": f"Bearer oj_{uuid.uuid4().hex[:8]}_nope"}
        )
        for _ in range(3)
    ]
    assert [r.status_code for r in wrong] == [401, 401, 401]

    async def looked_up(**kwargs):
        raise AssertionError("a refused address must not cost a key lookup")

    monkeypatch.setattr("api.plumbing.authentication.apikey_verify", looked_up)
    refused = await api.post("/v1/systemone", json=README_REQUEST, headers={"Authorization": f"Bearer {good.secret}"})
    assert_limited(refused, counted=None)


async def test_each_message_of_the_stream_counts_against_the_callers_limit(asgi_server, fake, limit):
    from websockets.asyncio.client import connect

    from tests.stream.conftest import of, send, until_ended, ws_url

    limit(key_requests_per_minute=2)
    async with connect(ws_url(asgi_server)) as ws:
        for eid in ("a", "b", "c"):
            await send(ws, {"id": eid, **README_REQUEST})
        messages = await until_ended(ws, ["a", "b", "c"])
    errors = [m for m in messages if m["type"] == "error"]
    assert len(of(messages, "a", "done")) + len(of(messages, "b", "done")) + len(of(messages, "c", "done")) == 2
    (error,) = errors
    assert error["status"] == 429 and error["detail"]["error_type"] == "rate_limited"

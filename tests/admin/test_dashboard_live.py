"""The dashboard's live socket: the last hour from the database, then every second from every API process
(in memory within one process; through the real Redis on 127.0.0.1:6379 across processes), for staff only."""

from __future__ import annotations

import asyncio
import json
import os
import time
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Origin

from audit.dashboard_live import BUCKET_SECONDS, dashboard_snapshot
from audit.livefeed import LATENCY_BUCKETS_PER_DECADE, SEND_TIMEOUT_SECONDS, LiveFeed, Tally, latency_bucket
from openjev_site.channel_layers import channel_layers_config
from serving.config_reading import config_from_env
from serving.setting_rules import ConfigError
from testbed.ports import free_port
from tests.conftest import README_REQUEST
from tests.database import db
from tests.factories import evaluation_make
from tests.ops.helpers import Serve, serve_env

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

LIVE_PATH = "/admin/evaluations/evaluation/dashboard/live"
REDIS_URL = os.environ.get("OPENJEV_TEST_REDIS_URL", "redis://127.0.0.1:6379/7")


def at(second: int) -> datetime:
    return datetime.fromtimestamp(second, tz=UTC)


def test_a_tally_counts_status_classes_latency_buckets_and_label_masses():
    tally = Tally(second=100)
    tally.add(status=200, total_ms=12.0, masses=[0.97, 0.42], generations=3)
    tally.add(status=529, total_ms=0.4, masses=[], generations=0)
    tally.add(status=499, total_ms=900.0, masses=[], generations=2)
    message = tally.message()
    assert message["n"] == 3 and message["gen"] == 5
    assert message["status"] == {"answered": 1, "overloaded": 1, "cancelled": 1}
    assert message["lat"] == {str(latency_bucket(ms=12.0)): 1}  # only answered evaluations have a latency
    assert 10 ** (latency_bucket(ms=12.0) / LATENCY_BUCKETS_PER_DECADE) <= 12.0
    assert 10 ** ((latency_bucket(ms=12.0) + 1) / LATENCY_BUCKETS_PER_DECADE) > 12.0
    assert message["mass"] == [0, 0, 0, 0, 1, 0, 0, 0, 0, 1]
    json.dumps(message)


def test_the_snapshot_holds_what_finished_in_the_last_hour_before_the_socket_joined():
    now = 1_800_000_000
    evaluation_make(created_at=at(now - 100), total_ms=250.0)
    evaluation_make(created_at=at(now - 130), total_ms=3000.0)  # finished at now - 127
    evaluation_make(status=422, created_at=at(now - 50), total_ms=1.0)
    evaluation_make(created_at=at(now - 3), total_ms=5000.0)  # finishes after the socket joined: live only
    evaluation_make(created_at=at(now - 4000), total_ms=10.0)  # more than an hour ago
    snapshot = dashboard_snapshot(now=now, until=now - 1)
    tallies = {t["t"]: t for t in snapshot["tallies"]}
    assert sum(t["n"] for t in tallies.values()) == 3
    first = tallies[(now - 100) // BUCKET_SECONDS * BUCKET_SECONDS]
    assert first["status"] == {"answered": 1} and first["lat"] == {str(latency_bucket(ms=250.0)): 1}
    assert first["mass"][9] == 3 and first["gen"] is None  # three answers of label mass 0.97; generations unknown
    assert tallies[(now - 127) // BUCKET_SECONDS * BUCKET_SECONDS]["lat"] == {str(latency_bucket(ms=3000.0)): 1}
    assert tallies[(now - 50) // BUCKET_SECONDS * BUCKET_SECONDS]["status"] == {"client_error": 1}
    assert snapshot["since"] == (now - 3600) // BUCKET_SECONDS * BUCKET_SECONDS
    assert snapshot["truncated_before"] is None


def session_cookie(*, staff: bool) -> str:
    user = get_user_model().objects.create_user(
        "ops" if staff else "guest", password="correct horse battery", is_staff=staff, is_superuser=staff
    )
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def live_url(server_url: str) -> str:
    return server_url.replace("http://", "ws://") + LIVE_PATH


async def live_connect(server_url: str, cookie: str | None, origin: str | None = None) -> ClientConnection:
    headers = {"Cookie": cookie} if cookie else {}
    return await connect(live_url(server_url), additional_headers=headers, origin=Origin(origin or server_url))


async def message_of(ws: ClientConnection, kind: str, timeout: float = 10.0) -> dict[str, Any]:
    async with asyncio.timeout(timeout):
        while True:
            message = json.loads(await ws.recv())
            if message["type"] == kind:
                return message


async def test_only_staff_on_this_sites_pages_may_open_the_dashboard_socket(asgi_server):
    guest = await db(lambda: session_cookie(staff=False))
    staff = await db(lambda: session_cookie(staff=True))
    for cookie, origin in ((None, None), (guest, None), (staff, "https://evil.example")):
        async with await live_connect(asgi_server.url, cookie, origin) as ws:
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4403
    async with await live_connect(asgi_server.url, staff) as ws:
        assert (await message_of(ws, "snapshot"))["bucket_seconds"] == BUCKET_SECONDS


async def test_the_socket_sends_the_stored_hour_then_each_second_as_it_happens(asgi_server, store):
    cookie = await db(lambda: session_cookie(staff=True))
    await db(lambda: evaluation_make(created_at=at(int(time.time()) - 5), total_ms=20.0))
    async with await live_connect(asgi_server.url, cookie) as ws:
        snapshot = await message_of(ws, "snapshot")
        assert sum(t["n"] for t in snapshot["tallies"]) == 1
        async with httpx.AsyncClient(base_url=asgi_server.url) as client:
            assert (await client.post("/v1/systemone", json=README_REQUEST)).status_code == 200
            assert (await client.post("/v1/systemone", json={**README_REQUEST, "model": "x"})).status_code == 422
        seen = Tally(second=0)
        while seen.n < 2:
            tally = (await message_of(ws, "tick"))["tally"]
            assert tally["t"] >= snapshot["until"]
            seen.n += tally["n"]
            seen.generations = (seen.generations or 0) + tally["gen"]
            seen.statuses = {
                k: seen.statuses.get(k, 0) + tally["status"].get(k, 0) for k in {*seen.statuses, *tally["status"]}
            }
    assert seen.statuses == {"answered": 1, "client_error": 1}
    assert seen.generations == 4  # the warm-up and three branches


def database_url() -> str:
    """The test database, for the served processes to find the admin user and session in."""
    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{database['NAME']}"
    return f"postgresql://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}"


@pytest.fixture
def redis_layer() -> str:
    """The real Redis server (scripts/test.sh starts it); a database of its own for these tests."""
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except redis.exceptions.ConnectionError as exc:
        pytest.fail(f"Redis is not running at {REDIS_URL} ({exc}); scripts/test.sh starts it")
    return REDIS_URL


@pytest.mark.servers
async def test_several_api_processes_feed_one_dashboard_through_redis(fake, redis_layer, tmp_path, settings):
    env = serve_env(OPENJEV_CHANNEL_LAYER_URL=redis_layer, OPENJEV_DATABASE_URL=database_url())
    settings.SECRET_KEY = env["OPENJEV_SECRET_KEY"]  # the processes must be able to read the admin's session
    cookie = await db(lambda: session_cookie(staff=True))
    with (
        Serve(["--connect", fake.url], log=tmp_path / "a.log", env=env) as a,
        Serve(["--connect", fake.url], log=tmp_path / "b.log", env=env) as b,
    ):
        await asyncio.to_thread(a.wait_healthy)
        await asyncio.to_thread(b.wait_healthy)
        async with await live_connect(a.url, cookie) as ws:
            await message_of(ws, "snapshot")
            async with httpx.AsyncClient() as client:  # to the other process only
                for _ in range(3):
                    assert (await client.post(b.url + "/v1/systemone", json=README_REQUEST)).status_code == 200
            counted = 0
            while counted < 3:
                counted += (await message_of(ws, "tick"))["tally"]["n"]
    assert counted == 3


def test_the_in_memory_layer_is_the_default_and_redis_is_taken_from_the_url():
    assert channel_layers_config(url=None)["default"]["BACKEND"] == "channels.layers.InMemoryChannelLayer"
    redis_config = channel_layers_config(url=REDIS_URL)["default"]
    assert redis_config["BACKEND"] == "channels_redis.core.RedisChannelLayer"
    assert redis_config["CONFIG"]["hosts"] == [REDIS_URL]
    with pytest.raises(ConfigError, match="OPENJEV_CHANNEL_LAYER_URL"):
        config_from_env({"OPENJEV_CHANNEL_LAYER_URL": "memcached://127.0.0.1"})


async def test_a_channel_layer_that_is_down_costs_the_feed_a_few_seconds_never_the_api(asgi_server, settings, caplog):
    settings.CHANNEL_LAYERS = channel_layers_config(url=f"redis://127.0.0.1:{free_port()}/0")
    feed = LiveFeed()
    started = time.monotonic()
    await feed._send([Tally(second=1)])
    assert time.monotonic() - started < SEND_TIMEOUT_SECONDS + 1
    assert "could not reach the channel layer" in caplog.text
    async with httpx.AsyncClient(base_url=asgi_server.url) as client:
        assert (await client.post("/v1/systemone", json=README_REQUEST)).status_code == 200

"""WebSocket limits an attacker meets: wrong keys over the stream count in the same wrong-key throttle as over
HTTP (an address over it is closed with 4429), one key (or one address without keys) holds at most its share
of the process's sockets (4429), and API sockets never take the admin dashboard's room. Through uvicorn as
`serve` runs it, with a real `websockets` client."""

from __future__ import annotations

import asyncio
import json
import uuid
from contextlib import AsyncExitStack
from dataclasses import replace

import httpx
import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.test import Client
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Origin

from audit.keys import KeysUnavailable, apikey_issue
from serving.config_reading import config_from_env
from serving.setting_rules import ConfigError
from tests.conftest import README_REQUEST
from tests.database import db

KEY = "sk-sockets-test-key-0123456789"
STREAM = "/v1/systemone/stream"
DASHBOARD = "/admin/evaluations/evaluation/dashboard/live"


def ws_url(served: str, path: str = STREAM) -> str:
    return served.replace("http://", "ws://") + path


async def closed_with(ws: ClientConnection) -> tuple[int, str]:
    """The code and reason the server closed `ws` with (messages before it skipped)."""
    with pytest.raises(ConnectionClosed) as closed:
        async with asyncio.timeout(10):
            while True:
                await ws.recv()
    assert closed.value.rcvd is not None
    return closed.value.rcvd.code, closed.value.rcvd.reason


async def evaluates(ws: ClientConnection) -> bool:
    """Whether `ws` answers an evaluation to its end (False: it was closed instead)."""
    try:
        await ws.send(json.dumps({"id": 1, **README_REQUEST}))
        while (kind := json.loads(await ws.recv())["type"]) not in ("done", "error"):
            pass
    except ConnectionClosed:
        return False
    return kind == "done"


async def eventually_evaluates(url: str, *, headers: dict[str, str]) -> bool:
    """Whether a new socket is served within a few seconds (a socket is counted out once its consumer returned,
    just after the close)."""
    for _ in range(50):
        async with connect(url, additional_headers=headers) as ws:
            if await evaluates(ws):
                return True
        await asyncio.sleep(0.05)
    return False


def bearer(key: str, **headers: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", **headers}


@pytest.fixture
def keys_on(settings):
    """Auth on with the environment key; `bad_keys_per_minute` wrong keys per address per minute."""

    def switch(*, bad_keys_per_minute: int = 30) -> None:
        settings.OPENJEV = replace(settings.OPENJEV, api_key=KEY, bad_keys_per_minute=bad_keys_per_minute)

    return switch


@pytest.mark.django_db(transaction=True)  # a wrong key is looked up among the issued keys
async def test_wrong_keys_over_the_stream_are_throttled_like_over_http_and_close_the_socket_with_4429(served, keys_on):
    keys_on(bad_keys_per_minute=3)
    for n in range(3):
        async with connect(ws_url(served), additional_headers=bearer(f"guess-{n}")) as ws:
            assert (await closed_with(ws))[0] == 4401
    async with connect(ws_url(served), additional_headers=bearer(KEY)) as ws:  # the right key too
        code, reason = await closed_with(ws)
    assert code == 4429 and "wrong API keys" in reason
    async with connect(ws_url(served)) as ws:  # a key sent as the first message, as a browser does
        await ws.send(json.dumps({"type": "auth", "api_key": KEY}))
        assert (await closed_with(ws))[0] == 4429
    async with httpx.AsyncClient(base_url=served) as api:
        assert (await api.post("/v1/systemone", json=README_REQUEST, headers=bearer(KEY))).status_code == 429


@pytest.mark.django_db(transaction=True)
async def test_wrong_keys_over_http_keep_the_address_off_the_stream_too(served, keys_on):
    keys_on(bad_keys_per_minute=3)
    async with httpx.AsyncClient(base_url=served) as api:
        for n in range(3):
            response = await api.post("/v1/systemone", json=README_REQUEST, headers=bearer(f"guess-{n}"))
            assert response.status_code == 401
    async with connect(ws_url(served), additional_headers=bearer(KEY)) as ws:
        assert (await closed_with(ws))[0] == 4429


@pytest.mark.django_db(transaction=True)
async def test_the_stream_and_the_http_api_count_the_same_forwarded_address(served, keys_on, trusted):
    keys_on(bad_keys_per_minute=3)
    trusted("127.0.0.1")  # the test's connections play the proxy
    for n in range(3):
        guessing = bearer(f"guess-{n}", **{"X-Forwarded-For": "203.0.113.9"})
        async with connect(ws_url(served), additional_headers=guessing) as ws:
            assert (await closed_with(ws))[0] == 4401
    async with httpx.AsyncClient(base_url=served) as api:
        locked = await api.post(
            "/v1/systemone", json=README_REQUEST, headers=bearer(KEY, **{"X-Forwarded-For": "203.0.113.9"})
        )
        other = await api.post(
            "/v1/systemone", json=README_REQUEST, headers=bearer(KEY, **{"X-Forwarded-For": "198.51.100.7"})
        )
    assert locked.status_code == 429 and other.status_code == 200
    async with connect(ws_url(served), additional_headers=bearer(KEY, **{"X-Forwarded-For": "198.51.100.7"})) as ws:
        assert await evaluates(ws)


@pytest.mark.django_db(transaction=True)
async def test_one_key_holds_at_most_its_share_of_the_sockets_and_other_keys_are_served(served, keys_on, settings):
    keys_on()
    settings.OPENJEV = replace(settings.OPENJEV, max_websockets_per_key=2)
    other = await db(lambda: apikey_issue(name=f"other-{uuid.uuid4().hex[:6]}"))
    async with AsyncExitStack() as held:
        for _ in range(2):
            await held.enter_async_context(connect(ws_url(served), additional_headers=bearer(KEY)))
        async with connect(ws_url(served), additional_headers=bearer(KEY)) as third:
            code, reason = await closed_with(third)
        assert code == 4429 and "2 sockets" in reason
        async with connect(ws_url(served), additional_headers=bearer(other.secret)) as ws:
            assert await evaluates(ws)
    assert await eventually_evaluates(ws_url(served), headers=bearer(KEY))  # once the key's sockets are closed


async def test_without_keys_one_address_holds_at_most_its_share_and_another_address_is_served(
    served, settings, trusted
):
    settings.OPENJEV = replace(settings.OPENJEV, max_websockets_per_key=2)
    trusted("127.0.0.1")
    first = {"X-Forwarded-For": "203.0.113.9"}
    async with connect(ws_url(served), additional_headers=first), connect(ws_url(served), additional_headers=first):
        async with connect(ws_url(served), additional_headers=first) as third:
            assert (await closed_with(third))[0] == 4429
        async with connect(ws_url(served), additional_headers={"X-Forwarded-For": "198.51.100.7"}) as ws:
            assert await evaluates(ws)


async def test_sockets_still_waiting_for_their_key_count_against_their_address_and_the_oldest_gives_way(
    served, keys_on, settings
):
    """An address holds at most its share of sockets waiting for a key: one more makes the longest waiting close
    (4429), so what the address holds stays bounded and a newer socket, which may bring its key, is not refused."""
    keys_on()
    settings.OPENJEV = replace(settings.OPENJEV, max_websockets_per_key=2)
    async with connect(ws_url(served)) as first, connect(ws_url(served)), connect(ws_url(served)) as third:
        code, reason = await closed_with(first)
        assert code == 4429 and "authenticate sooner" in reason
        await third.send(json.dumps({"type": "auth", "api_key": KEY}))
        assert await evaluates(third)


@pytest.mark.django_db(transaction=True)
async def test_an_address_full_of_sockets_without_keys_never_keeps_a_valid_keys_socket_out(served, keys_on, settings):
    """The review's repro: a valid key's socket refused because its address held 100 sockets with no key. The
    key's socket counts for its key (on the upgrade) or takes a waiting socket's place (an auth message)."""
    keys_on()
    settings.OPENJEV = replace(settings.OPENJEV, max_websockets_per_key=3)
    async with AsyncExitStack() as held:
        for _ in range(3):
            await held.enter_async_context(connect(ws_url(served)))
        async with connect(ws_url(served), additional_headers=bearer(KEY)) as upgraded:
            assert await evaluates(upgraded)
        async with connect(ws_url(served)) as browser:
            await browser.send(json.dumps({"type": "auth", "api_key": KEY}))
            assert await evaluates(browser)


def test_the_per_key_socket_share_defaults_to_a_tenth_of_the_cap_and_may_not_exceed_it():
    assert config_from_env({}).max_websockets_per_key == 100
    assert config_from_env({"OPENJEV_MAX_WEBSOCKETS": "5"}).max_websockets_per_key == 1
    with pytest.raises(ConfigError) as caught:
        config_from_env({"OPENJEV_MAX_WEBSOCKETS": "50", "OPENJEV_MAX_WEBSOCKETS_PER_KEY": "51"})
    assert "up to OPENJEV_MAX_WEBSOCKETS (50)" in str(caught.value)


def staff_cookie() -> str:
    user = get_user_model().objects.create_superuser("ops", "ops@example.com", "correct horse battery")
    client = Client()
    client.force_login(user)
    return f"{django_settings.SESSION_COOKIE_NAME}={client.cookies[django_settings.SESSION_COOKIE_NAME].value}"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
async def test_api_sockets_filling_the_process_never_starve_the_admin_dashboard(served, settings):
    settings.OPENJEV = replace(settings.OPENJEV, max_websockets=2, max_websockets_per_key=2)
    cookie = await db(staff_cookie)
    async with connect(ws_url(served)), connect(ws_url(served)):
        async with connect(ws_url(served)) as refused:
            assert (await closed_with(refused))[0] == 4529
        dashboard = connect(ws_url(served, DASHBOARD), additional_headers={"Cookie": cookie}, origin=Origin(served))
        async with dashboard as ws:
            assert json.loads(await ws.recv())["type"] == "snapshot"


async def test_a_key_store_outage_closes_the_socket_with_4503_never_a_server_error(served, keys_on, monkeypatch):
    keys_on()

    async def unavailable(**kwargs):
        raise KeysUnavailable("the database is down")

    monkeypatch.setattr("api.plumbing.authentication.apikey_verify", unavailable)
    async with connect(ws_url(served), additional_headers=bearer("oj_someone_else")) as ws:
        code, reason = await closed_with(ws)
    assert code == 4503 and "retry shortly" in reason

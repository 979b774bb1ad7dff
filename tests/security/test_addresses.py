"""The client's address: the peer's, or what `OPENJEV_TRUSTED_PROXIES` forwarded (the rightmost hop that is not a
trusted proxy). Behind the proxy each client is counted on its own; from anyone else, `X-Forwarded-For`
changes nothing. The HTTP API, the admin's sign-in lockout and the servers `serve` runs all agree."""

from __future__ import annotations

import ipaddress
import logging
import re
import uuid
from dataclasses import replace

import httpx
import pytest
from django.contrib.auth import get_user_model

from serving.addresses import client_address_resolve
from serving.config_reading import config_from_env
from serving.setting_rules import ConfigError
from tests.conftest import README_REQUEST

KEY = "sk-addresses-test-key-0123456789"
PROXY = "10.0.0.2"
"""The reverse proxy's address, as the API sees it in these tests."""


def networks(*raw: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(n) for n in raw)


def test_without_trusted_proxies_x_forwarded_for_changes_no_address():
    for peer in ("127.0.0.1", "::1", "10.0.0.2"):
        assert client_address_resolve(peer=peer, forwarded_for="203.0.113.9", trusted=()) == peer
    assert config_from_env({}).trusted_proxies == ()  # loopback is not trusted by default either


def test_through_trusted_proxies_the_rightmost_hop_that_is_not_a_proxy_is_the_client():
    trusted = networks("10.0.0.0/8", "127.0.0.1/32")
    resolve = lambda peer, forwarded: client_address_resolve(peer=peer, forwarded_for=forwarded, trusted=trusted)  # noqa: E731
    assert resolve("10.0.0.2", "198.51.100.7") == "198.51.100.7"
    # What the client wrote itself sits left of what the proxies appended: never believed.
    assert resolve("10.0.0.2", "1.1.1.1, 2.2.2.2, 198.51.100.7") == "198.51.100.7"
    assert resolve("10.0.0.2", "198.51.100.7, 10.0.0.9, 127.0.0.1") == "198.51.100.7"  # two proxies in a row
    assert resolve("10.0.0.2", "10.0.0.7, 10.0.0.8") == "10.0.0.7"  # every hop a proxy: the leftmost
    assert resolve("203.0.113.9", "198.51.100.7") == "203.0.113.9"  # a peer that is not a proxy
    assert resolve("10.0.0.2", "[2001:db8::1]:4711") == "2001:db8::1"
    assert resolve("10.0.0.2", "198.51.100.7:4711") == "198.51.100.7"
    assert resolve("::ffff:10.0.0.2", "198.51.100.7") == "198.51.100.7"  # an IPv4 proxy on a dual-stack socket


@pytest.mark.parametrize("entry", ["evil", "", "unknown", "1.2.3.4.5", "<script>", "198.51.100.7 ; drop", "x" * 300])
def test_a_forwarded_entry_that_is_not_an_ip_address_is_never_the_client(entry):
    trusted = networks("10.0.0.0/8")
    assert client_address_resolve(peer=PROXY, forwarded_for=entry, trusted=trusted) == PROXY
    # Behind it, the last hop a proxy vouched for stands: nothing left of a made-up entry is believed.
    behind = client_address_resolve(peer=PROXY, forwarded_for=f"198.51.100.7, {entry}, 10.0.0.5", trusted=trusted)
    assert behind == "10.0.0.5"


def test_trusted_proxies_are_addresses_and_networks_and_a_bad_one_stops_the_start():
    config = config_from_env({"OPENJEV_TRUSTED_PROXIES": " 10.0.0.0/8, 127.0.0.1,::1 ,"})
    assert config.trusted_proxies == networks("10.0.0.0/8", "127.0.0.1/32", "::1/128")
    for bad, said in (("10.0.0.0/33", "'10.0.0.0/33'"), ("10.0.0.1/8", "host bits set"), ("*", "'*'")):
        with pytest.raises(ConfigError) as caught:
            config_from_env({"OPENJEV_TRUSTED_PROXIES": f"127.0.0.1,{bad}"})
        assert str(caught.value).startswith("OPENJEV_TRUSTED_PROXIES: ") and said in str(caught.value)


def client_through(peer: str) -> httpx.AsyncClient:
    """A client of the site whose connections come from `peer` (a proxy, or a client reaching the API directly)."""
    from openjev_site.asgi import application

    transport = httpx.ASGITransport(app=application, client=(peer, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://testserver")


def forwarded(address: str, *, key: str) -> dict[str, str]:
    return {"X-Forwarded-For": address, "Authorization": f"Bearer {key}"}


@pytest.mark.django_db(transaction=True)  # a wrong key is looked up among the issued keys
async def test_behind_the_proxy_one_clients_wrong_keys_leave_the_others_served(evaluator, settings, trusted):
    settings.OPENJEV = replace(settings.OPENJEV, api_key=KEY, bad_keys_per_minute=3)
    trusted("10.0.0.0/8")
    async with client_through(PROXY) as api:
        for _ in range(3):
            wrong = await api.post("/v1/systemone", json=README_REQUEST, headers=forwarded("203.0.113.9", key="nope"))
            assert wrong.status_code == 401
        locked = await api.post("/v1/systemone", json=README_REQUEST, headers=forwarded("203.0.113.9", key=KEY))
        served = await api.post("/v1/systemone", json=README_REQUEST, headers=forwarded("198.51.100.7", key=KEY))
    assert locked.status_code == 429  # the address that guessed, the right key included
    assert served.status_code == 200, served.text  # everyone else behind the same proxy


async def test_behind_the_proxy_each_client_without_keys_has_its_own_requests_per_minute(evaluator, settings, trusted):
    settings.OPENJEV = replace(settings.OPENJEV, key_requests_per_minute=1)
    trusted("10.0.0.0/8")
    async with client_through(PROXY) as api:

        async def status(address: str) -> int:
            response = await api.post("/v1/systemone", json=README_REQUEST, headers={"X-Forwarded-For": address})
            return response.status_code

        assert [await status("203.0.113.9"), await status("203.0.113.9"), await status("198.51.100.7")] == [
            200,
            429,
            200,
        ]


async def test_a_made_up_forwarded_address_counts_as_the_proxys_own(evaluator, settings, trusted):
    settings.OPENJEV = replace(settings.OPENJEV, key_requests_per_minute=1)
    trusted("10.0.0.0/8")
    async with client_through(PROXY) as api:
        statuses = [
            (await api.post("/v1/systemone", json=README_REQUEST, headers={"X-Forwarded-For": made_up})).status_code
            for made_up in ("evil", "unknown-1", "not an address")
        ]
    assert statuses == [200, 429, 429]


@pytest.mark.django_db(transaction=True)
async def test_from_a_client_that_is_no_proxy_a_rotating_x_forwarded_for_never_dodges_the_wrong_key_throttle(
    served, settings
):
    """Through uvicorn as `serve` runs it: loopback is no proxy unless OPENJEV_TRUSTED_PROXIES says so."""
    settings.OPENJEV = replace(settings.OPENJEV, api_key=KEY, bad_keys_per_minute=3)
    async with httpx.AsyncClient(base_url=served) as api:
        statuses = [
            (
                await api.post(
                    "/v1/systemone", json=README_REQUEST, headers=forwarded(f"198.51.100.{n}", key=f"guess-{n}")
                )
            ).status_code
            for n in range(5)
        ]
        right = await api.post("/v1/systemone", json=README_REQUEST, headers=forwarded("192.0.2.1", key=KEY))
    assert statuses == [401, 401, 401, 429, 429] and right.status_code == 429


def test_the_access_log_names_the_client_the_protections_count(served, trusted, caplog):
    caplog.set_level(logging.INFO, logger="uvicorn.access")
    made_up = {"X-Forwarded-For": "198.51.100.7"}
    assert httpx.get(served + "/health/live", headers=made_up).status_code == 200
    trusted("127.0.0.1")
    assert httpx.get(served + "/health/live", headers={"X-Forwarded-For": "203.0.113.9"}).status_code == 200
    lines = [r.getMessage() for r in caplog.records if r.name == "uvicorn.access"]
    assert len(lines) == 2
    assert lines[0].startswith("127.0.0.1:") and "198.51.100.7" not in lines[0]  # not a proxy: its header is ignored
    assert lines[1].startswith("203.0.113.9:")


# -- the admin's sign-in lockout (django-axes), by username and address ------------------------------------------

ADMIN_PASSWORD = "correct horse battery staple"


def sign_in(base: str, *, username: str, password: str, forwarded_for: str) -> int:
    """One sign-in through the admin's form (its CSRF token included); the answer's status: 302 signed in, 200
    the form again, 429 locked out."""
    with httpx.Client(base_url=base) as client:
        form = client.get("/admin/login/?next=/admin/")
        found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
        assert found is not None, form.text[:300]
        response = client.post(
            "/admin/login/?next=/admin/",
            data={"username": username, "password": password, "csrfmiddlewaretoken": found.group(1), "next": "/admin/"},
            headers={"X-Forwarded-For": forwarded_for},
        )
        return response.status_code


@pytest.fixture
def admin_user(db_transactional) -> str:
    name = f"admin-{uuid.uuid4().hex[:6]}"
    get_user_model().objects.create_superuser(name, f"{name}@example.com", ADMIN_PASSWORD)
    return name


@pytest.fixture
def db_transactional(transactional_db) -> None:
    """The admin runs in the server's threads, on connections of their own: nothing may hide in a transaction."""


@pytest.mark.postgres
def test_behind_the_proxy_an_attacker_elsewhere_cannot_lock_the_admin_out(served, settings, trusted, admin_user):
    trusted("127.0.0.1")  # the test's connections play the proxy
    attacker = [
        sign_in(served, username=admin_user, password=f"guess {n}", forwarded_for="203.0.113.9")
        for n in range(settings.AXES_FAILURE_LIMIT)
    ]
    assert attacker == [200] * (settings.AXES_FAILURE_LIMIT - 1) + [429]
    assert sign_in(served, username=admin_user, password=ADMIN_PASSWORD, forwarded_for="203.0.113.9") == 429
    assert sign_in(served, username=admin_user, password=ADMIN_PASSWORD, forwarded_for="198.51.100.7") == 302


@pytest.mark.postgres
def test_from_a_client_that_is_no_proxy_a_rotating_x_forwarded_for_cannot_dodge_the_lockout(
    served, settings, admin_user
):
    attempts = [
        sign_in(served, username=admin_user, password=f"guess {n}", forwarded_for=f"198.51.100.{n}")
        for n in range(settings.AXES_FAILURE_LIMIT)
    ]
    assert attempts == [200] * (settings.AXES_FAILURE_LIMIT - 1) + [429]
    assert sign_in(served, username=admin_user, password=ADMIN_PASSWORD, forwarded_for="192.0.2.77") == 429

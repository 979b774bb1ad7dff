"""`ALLOWED_HOSTS` on every route (DNS rebinding: a name the attacker owns, pointed at this service), and a
browser's Origin compared with this service's own origin, scheme, host and port, on HTTP and both sockets."""

from __future__ import annotations

import json
import socket
from typing import Any

import httpx
import pytest
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.test import Client
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Origin

from api.decisions.openapi_examples import DECISIONS_REQUEST
from tests.conftest import README_REQUEST
from tests.database import db

REBOUND = {"Host": "evil.example:8000", "Origin": "http://evil.example:8000"}
"""What the victim's browser sends once the attacker's name resolves to this service."""
STREAM = "/v1/systemone/stream"
DASHBOARD = "/admin/evaluations/evaluation/dashboard/live"


@pytest.fixture
def hosts(settings):
    """The deployment's OPENJEV_ALLOWED_HOSTS for this test (tests otherwise allow any host)."""
    settings.ALLOWED_HOSTS = ["127.0.0.1", "testserver"]


ROUTES: list[tuple[str, str, Any, str]] = [
    ("POST", "/v1/systemone", README_REQUEST, "detail"),
    ("GET", "/v1/models", None, "detail"),
    ("GET", "/v1/limits", None, "detail"),
    ("POST", "/v1/decisions", DECISIONS_REQUEST, "openai"),
    ("POST", "/v1/classify", {"model": "sentiment", "input": "great"}, "classify"),
    ("GET", "/v1/nowhere", None, "detail"),
]


@pytest.mark.parametrize(("method", "path", "body", "shape"), ROUTES)
async def test_a_rebound_host_is_refused_with_400_on_every_api_route_in_its_shape(
    api, fake, hosts, method, path, body, shape
):
    response = await api.request(method, path, json=body, headers=REBOUND)
    assert response.status_code == 400, response.text
    assert response.headers["x-typesafe-request-id"]  # the refusal carries the request id of its route
    error = response.json()
    if shape == "openai":
        assert error["error"]["code"] == "invalid_host" and error["error"]["type"] == "invalid_request_error"
    elif shape == "classify":
        assert error["type"] == "invalid_host" and error["code"] == 400
    else:
        assert error["detail"]["error_type"] == "invalid_host"
    assert "evil.example" not in response.text  # the client's value is not echoed
    assert fake.generate_calls == 0


async def test_an_allowed_host_is_served_with_or_without_its_port(api, fake, hosts):
    for host in ("testserver", "127.0.0.1:8000"):
        response = await api.post("/v1/systemone", json=README_REQUEST, headers={"Host": host})
        assert response.status_code == 200, (host, response.text)


async def test_the_health_checks_and_metrics_answer_any_host_as_balancers_and_prometheus_reach_by_address(
    api, fake, hosts
):
    for path in ("/health", "/health/live", "/metrics"):
        response = await api.get(path, headers={"Host": "10.1.2.3:8000"})
        assert response.status_code == 200, (path, response.text)


@pytest.mark.parametrize("path", ["/admin/login/", "/docs", "/openapi.json", "/"])
async def test_the_admin_and_the_docs_refuse_a_rebound_host_too(api, hosts, path):
    assert (await api.get(path, headers=REBOUND)).status_code == 400
    assert (await api.get(path)).status_code in (200, 302)


def socket_to(path: str, headers: dict[str, str], *, scheme: str = "ws") -> WebsocketCommunicator:
    """A WebSocket to the whole site, with the headers (and scheme) a client's upgrade would carry."""
    from openjev_site.asgi import application

    raw = [(name.lower().encode(), value.encode()) for name, value in headers.items()]
    communicator = WebsocketCommunicator(application, path, headers=raw)
    communicator.scope.update(scheme=scheme, client=("127.0.0.1", 50000), server=("127.0.0.1", 8000))
    return communicator


async def closed_with(communicator: WebsocketCommunicator) -> tuple[int, str]:
    """The code and reason a socket the server accepted is closed with (messages before it are skipped)."""
    connected, _ = await communicator.connect()
    assert connected
    while True:
        message = await communicator.receive_output(timeout=5)
        if message["type"] == "websocket.close":
            await communicator.wait()
            return message["code"], message.get("reason", "")


@pytest.mark.parametrize("path", [STREAM, DASHBOARD, "/v1/nowhere"])
async def test_a_socket_to_a_rebound_host_is_closed_with_4400_on_every_route(evaluator, hosts, path):
    code, reason = await closed_with(socket_to(path, REBOUND))
    assert code == 4400 and "OPENJEV_ALLOWED_HOSTS" in reason and "evil" not in reason


@pytest.mark.parametrize(
    "origin",
    [
        "https://evil.example",
        "http://127.0.0.1:8001",  # another port
        "https://127.0.0.1:8000",  # another scheme
        "null",  # a sandboxed page or a file
    ],
)
async def test_a_stream_socket_opened_by_a_page_of_another_origin_is_closed_with_4403(evaluator, origin):
    code, reason = await closed_with(socket_to(STREAM, {"Host": "127.0.0.1:8000", "Origin": origin}))
    assert code == 4403 and "another origin" in reason


async def evaluated(url: str, *, origin: str | None = None, headers: dict[str, str] | None = None) -> bool:
    """Whether a stream socket at `url` (opened by a page of `origin`, if any) answers an evaluation to its end."""
    async with connect(url, origin=Origin(origin) if origin else None, additional_headers=headers or {}) as ws:
        try:
            await ws.send(json.dumps({"id": 1, **README_REQUEST}))
            while (kind := json.loads(await ws.recv())["type"]) not in ("done", "error"):
                pass
        except ConnectionClosed:
            return False
        return kind == "done"


async def test_a_stream_socket_from_this_origin_or_from_a_client_that_is_no_browser_is_served(served, trusted):
    url = served.replace("http://", "ws://") + STREAM
    assert await evaluated(url, origin=served)
    assert await evaluated(url)
    assert not await evaluated(url, origin=served.replace("http://", "https://"))
    trusted("127.0.0.1")  # TLS ended at a proxy on this machine, which says so
    https = {"X-Forwarded-Proto": "https"}
    assert await evaluated(url, origin=served.replace("http://", "https://"), headers=https)
    assert not await evaluated(url, origin=served, headers=https)


@pytest.mark.parametrize(
    ("origin", "served"),
    [
        ("http://testserver", True),
        ("http://testserver:80", True),  # the default port, written out
        ("https://testserver", False),  # another scheme
        ("http://testserver:8080", False),  # another port
        ("http://testserver.evil.example", False),
        ("http://[::1", False),  # not even a URL
    ],
)
async def test_a_browser_post_is_served_only_from_this_exact_origin(api, fake, origin, served):
    response = await api.post("/v1/systemone", json=README_REQUEST, headers={"Origin": origin})
    assert response.status_code == (200 if served else 403), response.text


async def test_behind_tls_termination_a_trusted_proxys_scheme_makes_the_https_page_this_origin(
    evaluator, settings, trusted
):
    from openjev_site.asgi import application

    trusted("10.0.0.2")
    transport = httpx.ASGITransport(app=application, client=("10.0.0.2", 40000))
    page = {"Origin": "https://testserver", "X-Forwarded-Proto": "https"}
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as api:
        assert (await api.post("/v1/systemone", json=README_REQUEST, headers=page)).status_code == 200
    untrusted = httpx.ASGITransport(app=application, client=("203.0.113.9", 40000))
    async with httpx.AsyncClient(transport=untrusted, base_url="http://testserver") as api:
        assert (await api.post("/v1/systemone", json=README_REQUEST, headers=page)).status_code == 403


def staff_cookie() -> str:
    user = get_user_model().objects.create_superuser("ops", "ops@example.com", "correct horse battery")
    client = Client()
    client.force_login(user)
    return f"{django_settings.SESSION_COOKIE_NAME}={client.cookies[django_settings.SESSION_COOKIE_NAME].value}"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("origin", "scheme", "opened"),
    [
        ("http://127.0.0.1:8000", "ws", True),
        ("https://127.0.0.1:8000", "ws", False),  # the https page is another origin than the http site
        ("http://127.0.0.1:8000", "wss", False),  # and the other way round
        ("https://127.0.0.1:8000", "wss", True),  # TLS ended at a trusted proxy, which said so
        ("http://127.0.0.1:9000", "ws", False),
    ],
)
async def test_the_dashboard_socket_compares_the_origins_scheme_host_and_port(origin, scheme, opened):
    cookie = await db(staff_cookie)
    communicator = socket_to(DASHBOARD, {"Host": "127.0.0.1:8000", "Origin": origin, "Cookie": cookie}, scheme=scheme)
    connected, _ = await communicator.connect()
    assert connected
    message = await communicator.receive_output(timeout=10)
    if opened:
        assert json.loads(message["text"])["type"] == "snapshot"
        await communicator.disconnect()
    else:
        assert message["type"] == "websocket.close" and message["code"] == 4403


TWO_HOSTS = [("Host", "testserver"), ("Host", "testserver"), ("Origin", "http://testserver")]
"""The review's repro: two Host headers (Django joins them into one no rule matches) and an Origin, which made
the API's cross-site check ask Django for the host: 500 DisallowedHost."""


EVERYWHERE = [
    *((method, path, body) for method, path, body, _ in ROUTES),
    *(("GET", path, None) for path in ("/admin/login/", "/docs", "/health", "/metrics")),
]


@pytest.mark.parametrize(("method", "path", "body"), EVERYWHERE)
async def test_two_host_headers_are_a_400_everywhere_never_a_server_error(api, fake, method, path, body):
    response = await api.request(method, path, json=body, headers=TWO_HOSTS)
    assert response.status_code == 400, response.text
    assert "more than one Host header" in response.text
    assert fake.generate_calls == 0


def test_two_host_headers_through_the_server_serve_runs_are_a_400(served):
    """The same through uvicorn as `serve` runs it, whose HTTP parser hands both headers on."""
    host, port = served.removeprefix("http://").split(":")
    body = json.dumps(README_REQUEST).encode()
    request = (
        f"POST /v1/systemone HTTP/1.1\r\nHost: {host}:{port}\r\nHost: {host}:{port}\r\nOrigin: {served}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.split(b"\r\n", 1)[0].split(b" ")[1] == b"400", answer[:300]


def test_a_suspicious_operation_anywhere_is_a_400_never_a_500():
    from django.core.exceptions import DisallowedHost

    from api.plumbing.error_responses import api_error_of

    assert api_error_of(DisallowedHost("Invalid HTTP_HOST header")).status == 400

"""Stalled connections are dropped in the served configuration: `serve`'s uvicorn (with its header
deadline) in front of the site's ASGI stack (with its body deadline), over real sockets."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
from django.conf import settings as django_settings

from api.management.serve_api import server_options
from api.plumbing.request_body import RequestBodyReader
from api.plumbing.requestids import RequestIds
from serving.servers import server_create
from testbed.ports import free_port

HEADER_TIMEOUT = 0.5
BODY_TIMEOUT = 0.5
KEEP_ALIVE = 5


@pytest.fixture
def served(settings) -> Iterator[int]:
    """The site's stack as `serve` runs it, with short deadlines; yields the port."""
    from openjev_site.asgi import _is_api, router

    settings.OPENJEV = replace(settings.OPENJEV, header_timeout=HEADER_TIMEOUT)
    app = RequestIds(
        RequestBodyReader(router, max_bytes=django_settings.OPENJEV.max_body_bytes, read_timeout=BODY_TIMEOUT),
        applies=_is_api,
    )
    port = free_port()
    options = server_options(
        config=django_settings.OPENJEV,
        options={"host": "127.0.0.1", "port": port, "drain": 1, "keep_alive": KEEP_ALIVE, "access_log": False},
    )
    server = server_create(kind="uvicorn", app=app, options=options)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.02)
    yield port
    server.stop()
    thread.join(timeout=10)


def _read_until_closed(sock: socket.socket, *, timeout: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes, and when it closed (seconds from now)."""
    started = time.monotonic()
    sock.settimeout(timeout)
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received, time.monotonic() - started


def _chunked_response(sock: socket.socket) -> bytes:
    """One whole response of the API (Django streams it chunked), the connection left open."""
    sock.settimeout(5)
    received = b""
    while not received.endswith(b"\r\n0\r\n\r\n"):
        received += sock.recv(65536)
    return received


def _request(port: int, raw: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(raw)
    return sock


@pytest.mark.parametrize("sent", [b"", b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Le"])
def test_a_connection_without_complete_headers_gets_408_and_is_closed(served, sent):
    with _request(served, sent) as sock:
        received, after = _read_until_closed(sock, timeout=10)
    assert received.startswith(b"HTTP/1.1 408 ") and b'"error_type":"request_timeout"' in received
    assert HEADER_TIMEOUT * 0.8 < after < HEADER_TIMEOUT + 3


def test_a_body_that_stalls_gets_408_with_a_request_id_and_is_closed(served):
    head = b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    with _request(served, head + b'{"model":') as sock:
        received, after = _read_until_closed(sock, timeout=10)
    assert received.startswith(b"HTTP/1.1 408 ") and b"x-typesafe-request-id: req_" in received
    assert after < BODY_TIMEOUT + 3


def test_a_kept_alive_connection_is_not_cut_by_the_header_deadline_between_requests(served):
    request = b"GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n"
    with _request(served, request) as sock:
        assert _chunked_response(sock).startswith(b"HTTP/1.1 200 ")
        time.sleep(HEADER_TIMEOUT * 3)  # idle, well inside the keep-alive timeout
        sock.sendall(request)
        assert _chunked_response(sock).startswith(b"HTTP/1.1 200 ")
        sock.sendall(b"GET /health/live HTTP/1.1\r\n")  # the next request stalls half-way
        received, _ = _read_until_closed(sock, timeout=10)
    assert received.startswith(b"HTTP/1.1 408 ")

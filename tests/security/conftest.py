"""Security tests: the client's address through trusted proxies, hosts and origins, WebSocket limits. The
servers here are the real ones `serve` runs, with its options, in a thread of the test process."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from serving.config_reading import config_from_env
from serving.servers import ServerOptions, server_create
from testbed.ports import free_port
from tests.stored import storage_isolated

__all__ = ["storage_isolated"]


@pytest.fixture
def trusted(settings):
    """trusted("10.0.0.0/8,127.0.0.1"): the deployment's OPENJEV_TRUSTED_PROXIES for this test."""

    def set_trusted(raw: str) -> None:
        parsed = config_from_env({"OPENJEV_TRUSTED_PROXIES": raw}).trusted_proxies
        settings.OPENJEV = replace(settings.OPENJEV, trusted_proxies=parsed)

    return set_trusted


@pytest.fixture
def served(evaluator) -> Iterator[str]:
    """The site under uvicorn exactly as `manage.py serve` configures it, on loopback; yields its URL."""
    from openjev_site.asgi import application

    port = free_port()
    options = ServerOptions(
        host="127.0.0.1",
        port=port,
        drain=1.0,
        keep_alive=5,
        access_log=True,
        header_timeout=20.0,
        header_timeout_body=b"{}",
        websocket_max_bytes=1 << 22,
    )
    server = server_create(kind="uvicorn", app=application, options=options)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not start") from None
            time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.stop()
    thread.join(timeout=10)

"""Shared fixtures: the fake SGLang on loopback, an evaluator wired to it, and clients for the API."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace

import httpx
import pytest
import uvicorn
from django.conf import settings

from evaluations.evaluator import evaluator_build, evaluator_install
from evaluations.openapi.examples import README_REQUEST as SCHEMA_README_REQUEST
from inference.backends.sglang import SGLangBackend
from inference.runner import Evaluator
from tests.fakes.sglang import FakeSGLang
from tests.qwen3 import qwen3_tokenizer

# The README's request, exactly as the OpenAPI schema documents it.
README_REQUEST = SCHEMA_README_REQUEST


@pytest.fixture(scope="session")
def fake_server() -> Iterator[FakeSGLang]:
    with FakeSGLang(served_model_name="Qwen/Qwen3.6-35B-A3B") as server:
        yield server


@pytest.fixture
def fake(fake_server: FakeSGLang) -> Iterator[FakeSGLang]:
    fake_server.reset()
    if fake_server._uvicorn is None:
        fake_server.revive()
    yield fake_server
    fake_server.reset()
    if fake_server._uvicorn is None:
        fake_server.revive()


def url_evaluator(url: str, *, branch_mode: str = "batched", **overrides: object) -> Evaluator:
    """An evaluator on the SGLang-speaking server at `url` (a fake worker, or a gateway in front of some)."""
    config = replace(settings.OPENJEV, backend="sglang", backend_url=url, **overrides)  # type: ignore[arg-type]
    backend = SGLangBackend(url=url, model="Qwen/Qwen3.6-35B-A3B", tokenizer=qwen3_tokenizer(),
                            branch_mode=branch_mode,  # type: ignore[arg-type]
                            max_in_flight=config.max_concurrent_branches, timeout=config.request_timeout)
    return evaluator_build(config=config, backend=backend)


def fake_evaluator(server: FakeSGLang, *, branch_mode: str = "batched", **overrides: object) -> Evaluator:
    return url_evaluator(server.url, branch_mode=branch_mode, **overrides)


@pytest.fixture(params=["batched", "parallel"])
def branch_mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def evaluator(fake: FakeSGLang) -> Iterator[Evaluator]:
    built = fake_evaluator(fake)
    evaluator_install(built)
    yield built
    evaluator_install(None)


@pytest.fixture
async def api(evaluator: Evaluator) -> AsyncIterator[httpx.AsyncClient]:
    from openjev_site.asgi import application

    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        yield client


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveServer:
    """The real ASGI app under uvicorn on loopback, for clients that need a socket (SDK, jevcompat)."""

    def __init__(self, app: object | None = None) -> None:
        from openjev_site.asgi import application

        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app or application, host="127.0.0.1", port=self.port, log_level="warning",
                                lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("live server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)


@pytest.fixture
def asgi_server(evaluator: Evaluator) -> Iterator[LiveServer]:
    with LiveServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _storage_off_without_database(request: pytest.FixtureRequest, settings) -> None:
    """Tests that may not touch the database run with evaluation storage off (storage tests opt in)."""
    if request.node.get_closest_marker("django_db") is None and settings.OPENJEV.store_evaluations != "off":
        settings.OPENJEV = replace(settings.OPENJEV, store_evaluations="off")


@pytest.fixture(autouse=True)
def _classifiers_without_database(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tests that may not touch the database see no saved classifiers, so `/v1/models` and `/v1/classify`
    answer without one (classify tests install theirs with `tests.classify.conftest.classifiers`)."""
    from evaluations.classify import registry

    registry.classifier_cache_forget()
    if request.node.get_closest_marker("django_db") is None:
        monkeypatch.setattr(registry, "_classifiers_fetch", dict)
    yield
    registry.classifier_cache_forget()

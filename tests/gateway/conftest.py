"""Fixtures: two fake SGLang workers behind the real SGLang model gateway (`smg`), and API clients on it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator

import httpx
import pytest

from fake_sglang import FakeSGLang
from inference.backends.base import BranchMode
from inference.runner import Evaluator
from serving.evaluator import evaluator_install
from testbed.evaluators import url_evaluator
from testbed.smg import FAST_HEALTH, Gateway

MODEL = "Qwen/Qwen3.6-35B-A3B"


@pytest.fixture(scope="module")
def worker_pair() -> Iterator[tuple[FakeSGLang, FakeSGLang]]:
    with FakeSGLang(served_model_name=MODEL) as a, FakeSGLang(served_model_name=MODEL) as b:
        yield a, b


@pytest.fixture
def workers(worker_pair: tuple[FakeSGLang, FakeSGLang]) -> Iterator[tuple[FakeSGLang, FakeSGLang]]:
    """Both workers alive, with fresh records, controls and caches, before and after each test."""
    for worker in worker_pair:
        worker.reset()
        if not worker.listening:
            worker.revive()
    yield worker_pair
    for worker in worker_pair:
        worker.reset()
        if not worker.listening:
            worker.revive()


@pytest.fixture(scope="module")
def gateway(worker_pair: tuple[FakeSGLang, FakeSGLang], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    log = tmp_path_factory.mktemp("gateway") / "smg.log"
    with Gateway(workers=[w.url for w in worker_pair], log_path=log, flags=FAST_HEALTH) as running:
        yield running


@pytest.fixture
def live_gateway(gateway: Gateway, workers: tuple[FakeSGLang, FakeSGLang]) -> Gateway:
    """The module's gateway once both (revived) workers are back in its rotation."""
    gateway.wait_all_healthy()
    return gateway


@pytest.fixture(scope="module")
def empty_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with Gateway(workers=[], log_path=tmp_path_factory.mktemp("empty-gateway") / "smg.log") as running:
        yield running


def gateway_evaluator(gateway: Gateway, *, branch_mode: BranchMode = "batched", **overrides: object) -> Evaluator:
    return url_evaluator(gateway.url, branch_mode=branch_mode, **overrides)


@pytest.fixture
async def api_on() -> AsyncIterator[Callable[[Evaluator], httpx.AsyncClient]]:
    """A factory: `api_on(evaluator)` installs the evaluator and gives an ASGI client of the API."""
    from openjev_site.asgi import application

    clients: list[httpx.AsyncClient] = []

    def make(evaluator: Evaluator) -> httpx.AsyncClient:
        evaluator_install(evaluator)
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=application), base_url="http://testserver")
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()
    evaluator_install(None)

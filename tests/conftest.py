"""Shared fixtures: the fake SGLang on loopback, an evaluator wired to it, and clients for the API."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest

from api.systemone.examples import README_REQUEST as SCHEMA_README_REQUEST
from fake_sglang import FakeSGLang
from inference.runner import Evaluator
from serving.config import StoreLevel
from serving.evaluator import evaluator_install
from testbed.evaluators import fake_evaluator
from testbed.live_server import LiveServer

# The README's request, exactly as the OpenAPI schema documents it.
README_REQUEST = SCHEMA_README_REQUEST


@pytest.fixture(scope="session")
def fake_server() -> Iterator[FakeSGLang]:
    with FakeSGLang(served_model_name="Qwen/Qwen3.6-35B-A3B") as server:
        yield server


@pytest.fixture
def fake(fake_server: FakeSGLang) -> Iterator[FakeSGLang]:
    fake_server.reset()
    if not fake_server.listening:
        fake_server.revive()
    yield fake_server
    fake_server.reset()
    if not fake_server.listening:
        fake_server.revive()


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


@pytest.fixture
def asgi_server(evaluator: Evaluator) -> Iterator[LiveServer]:
    with LiveServer() as server:
        yield server


@pytest.fixture
def store(settings: Any) -> Callable[[StoreLevel], None]:
    """Set the storage level for this test: store("full" | "metadata" | "off"); "full" to begin with."""

    def set_level(level: StoreLevel) -> None:
        settings.OPENJEV = replace(settings.OPENJEV, store_evaluations=level)

    set_level("full")
    return set_level


@pytest.fixture(autouse=True)
def _writer_stopped_after_database_tests(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every test that may store ends with the storage writer stopped, so what it queued is written before
    its database is flushed, never into the next test's (tests without the database store nothing)."""
    yield
    if request.node.get_closest_marker("django_db") is not None:
        from audit.storage.writer import writer_stop

        assert writer_stop(timeout=30), "the storage writer did not stop"


@pytest.fixture(autouse=True)
def _rate_limit_outage_forgotten() -> Iterator[None]:
    """Each test starts with the per-key limits' store taken as up and no address known for wrong keys: a test
    that brought the store down (a Redis that is not there), or sent wrong keys, must not leave the next test's
    requests under the failure policy or the wrong-key throttle."""
    from api.plumbing import ratelimits_bad_keys, ratelimits_store

    def forget() -> None:
        ratelimits_store._outage.update(logged=False, until=0.0)
        ratelimits_bad_keys._failed_recently.clear()

    forget()
    yield
    forget()


@pytest.fixture(autouse=True)
def _database_outage_forgotten() -> Iterator[None]:
    """Each test starts with the database taken as up and the request path's caches empty (`audit.database`): a
    test that simulated an outage must not leave the next one's cache reads refused, or its writes put off, and
    no cache a test filled is refreshed from the database during the next one."""
    from audit.database import database_outage, refresher

    database_outage.forget()
    refresher.forget()
    yield
    database_outage.forget()
    refresher.forget()


@pytest.fixture(autouse=True)
def _storage_off_without_database(request: pytest.FixtureRequest, settings) -> Iterator[None]:
    """Tests that may not touch the database run with evaluation storage and calibration off (storage and
    calibration tests opt in), so no request of theirs reads or writes a table; the key usage their answers
    tallied is forgotten at the end, never written after them."""
    if request.node.get_closest_marker("django_db") is not None:
        yield
        return
    settings.OPENJEV = replace(settings.OPENJEV, store_evaluations="off", calibration=False)
    yield
    from audit.storage.store import pipeline

    if pipeline.drainer is not None:
        pipeline.drainer.tally.taken()


@pytest.fixture(autouse=True)
def _feedback_without_database(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests that may not touch the database find no stored answer to label (`POST /v1/feedback` is a 404)."""
    from api import feedback

    if request.node.get_closest_marker("django_db") is None:
        monkeypatch.setattr(feedback, "answer_find", lambda **_: None)


@pytest.fixture(autouse=True)
def _classifiers_without_database(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tests that may not touch the database see no saved classifiers, so `/v1/models` and `/v1/classify`
    answer without one (classify tests install theirs with `tests.classify.conftest.classifiers`)."""
    from api.classify import registry

    registry.classifier_cache_forget()
    if request.node.get_closest_marker("django_db") is None:
        monkeypatch.setattr(registry, "_classifiers_fetch", dict)
    yield
    registry.classifier_cache_forget()

"""One fake per module, reset for every test, and a client on it."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from fake_sglang import FakeSGLang


@pytest.fixture(scope="module")
def shared() -> Iterator[FakeSGLang]:
    with FakeSGLang() as server:
        yield server


@pytest.fixture
def fake(shared: FakeSGLang) -> FakeSGLang:
    """The module's server with fresh records, controls and cache for every test."""
    shared.reset()
    return shared


@pytest.fixture
def client(fake: FakeSGLang) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=fake.url, timeout=10) as http:
        yield http

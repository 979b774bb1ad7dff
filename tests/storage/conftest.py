"""Storage tests: a real database (SQLite file or PostgreSQL), the writer thread, and the API.

Tests here are `django_db(transaction=True)`: rows are written by the storage writer thread on its
own connection, which must see (and be seen by) the test's data, so nothing may hide inside a
test transaction. Every test ends with the writer stopped and its connection closed, so
PostgreSQL can drop the test database at the end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
from django.db import connections

from evaluations.keys import apikey_cache_forget
from evaluations.storage.writer import writer_drain, writer_stop


@pytest.fixture(autouse=True)
def _storage_isolated() -> Iterator[None]:
    apikey_cache_forget()
    yield
    assert writer_stop(timeout=30), "the storage writer did not stop"
    apikey_cache_forget()


@pytest.fixture
def store(settings: Any) -> Callable[[str], None]:
    """Set the storage level for this test: store("full" | "metadata" | "off")."""

    def set_level(level: str) -> None:
        settings.OPENJEV = replace(settings.OPENJEV, store_evaluations=level)

    set_level("full")
    return set_level


def _closing[T](fn: Callable[[], T]) -> Callable[[], T]:
    def run() -> T:
        try:
            return fn()
        finally:
            connections.close_all()

    return run


async def db[T](fn: Callable[[], T]) -> T:
    """Run ORM code from an async test in a worker thread that closes its connection afterwards."""
    return await asyncio.to_thread(_closing(fn))


async def drained() -> None:
    """Wait until the writer has written everything queued so far."""
    assert await asyncio.to_thread(writer_drain, timeout=30), "the storage writer did not drain"

"""What every test of stored data shares (`tests/storage/`, `tests/calibration/`, `tests/keys/`,
`tests/admin/`): a real database (SQLite file or PostgreSQL), the writer thread, and the API.

Tests there are `django_db(transaction=True)`: rows are written by the storage writer thread on its
own connection, which must see (and be seen by) the test's data, so nothing may hide inside a
test transaction. Every test ends with the writer stopped and its connection closed, so
PostgreSQL can drop the test database at the end. Each folder's conftest imports `storage_isolated`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from audit.keys import apikey_cache_forget
from audit.storage.writer import writer_drain, writer_stop
from calibration.applied import calibration_cache_forget


@pytest.fixture(autouse=True)
def storage_isolated() -> Iterator[None]:
    apikey_cache_forget()
    calibration_cache_forget()
    yield
    assert writer_stop(timeout=30), "the storage writer did not stop"
    apikey_cache_forget()
    calibration_cache_forget()


async def drained() -> None:
    """Wait until the writer has written everything queued so far."""
    assert await asyncio.to_thread(writer_drain, timeout=30), "the storage writer did not drain"

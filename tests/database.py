"""Database work from tests that cannot do it on their own thread: async tests (Django refuses sync ORM
calls on an event loop) and the browser tests (Playwright's sync API runs a loop in the test's thread).
The worker thread closes its connection afterwards, so PostgreSQL can drop the test database."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from django.db import connections


def _closing[T](fn: Callable[[], T]) -> T:
    try:
        return fn()
    finally:
        connections.close_all()


async def db[T](fn: Callable[[], T]) -> T:
    """Run ORM (or test-client) code from an async test in a worker thread."""
    return await asyncio.to_thread(_closing, fn)


def orm[T](fn: Callable[[], T]) -> T:
    """Run ORM code from a thread that holds a running event loop, in a worker thread."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(_closing, fn).result()

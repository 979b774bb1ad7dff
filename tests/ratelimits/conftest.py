"""What the limits' tests share: settings per test, a real Redis emptied of this service's counters, the 429's
shape."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest
import redis

REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture
def limit(settings):
    """limit(**fields) sets the deployment's limit settings for this test."""

    def set_limits(**fields) -> None:
        settings.OPENJEV = replace(settings.OPENJEV, **fields)

    return set_limits


@pytest.fixture
def redis_counts() -> Iterator[str]:
    """A real Redis for the counts, emptied of this service's counters before and after."""
    client = redis.Redis.from_url(REDIS_URL)

    def clear() -> None:
        for key in client.scan_iter("openjev*"):
            client.delete(key)

    clear()
    yield REDIS_URL
    clear()


def assert_limited(response: httpx.Response, *, counted: str | None = "requests") -> None:
    assert response.status_code == 429, response.text
    assert int(response.headers["retry-after"]) >= 1 and int(response.headers["retry-after-ms"]) >= 1
    if counted is not None:
        assert response.headers[f"x-ratelimit-remaining-{counted}"] == "0"
        assert int(response.headers[f"x-ratelimit-limit-{counted}"]) > 0
        assert response.headers[f"x-ratelimit-reset-{counted}"].endswith("s")

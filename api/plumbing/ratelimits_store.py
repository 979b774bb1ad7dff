"""Where the per-key limits (`api/plumbing/ratelimits.py`) are counted, and what happens when the counts cannot be
read.

With `OPENJEV_REDIS_URL` the counts live in Redis, so every process (`serve --workers N`) and every replica
shares them; without it each process counts alone. Each event loop has a storage of its own: Redis connections
belong to the loop that opened them.

Redis down, or not answering within `OPENJEV_RATE_LIMIT_TIMEOUT`: `OPENJEV_RATE_LIMIT_FAILURE=open` serves unlimited,
`closed` answers 429 (retry in 5 s), for every throttle (the wrong-key one too); the outage is logged once, it is
never a 5xx, and for `OUTAGE_SECONDS` after a failure Redis is not asked at all, so a Redis that hangs costs a request
nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from django.conf import settings
from limits.aio.storage import MemoryStorage, RedisStorage, Storage
from limits.aio.strategies import SlidingWindowCounterRateLimiter
from limits.errors import StorageError

from api.plumbing.api_error import ApiError
from api.plumbing.ratelimits_redis import RedisCounts
from api.plumbing.ratelimits_refusals import retry_in
from serving import metrics

log = logging.getLogger(__name__)

KEY_PREFIX = "openjev"
OUTAGE_SECONDS = 2.0
"""After Redis failed or timed out, how long its counts are not asked for (the failure policy applies at once)."""


@dataclass
class Counters:
    storage: Storage
    limiter: SlidingWindowCounterRateLimiter
    redis: RedisCounts | None
    """The batched path for a request's checks, with Redis; without it the library's calls, one by one."""


_loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Counters] = weakref.WeakKeyDictionary()
"""One storage per event loop: Redis connections belong to the loop that opened them."""
_outage: dict[str, float | bool] = {"logged": False, "until": 0.0}


def _storage_new() -> Storage:
    config = settings.OPENJEV
    url = config.redis_url
    if url is None:
        return MemoryStorage()
    # `limits` names a Redis socket `redis+unix://`, where redis-py and the channel layer read `unix://`.
    scheme = f"async+redis+{url}" if url.startswith("unix://") else f"async+{url}"
    timeout = config.rate_limit_timeout
    return RedisStorage(
        scheme,
        implementation="redispy",
        wrap_exceptions=True,
        key_prefix=KEY_PREFIX,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
    )


def loop_counters() -> Counters:
    loop = asyncio.get_running_loop()
    found = _loops.get(loop)
    if found is None:
        storage = _storage_new()
        found = _loops[loop] = Counters(
            storage=storage,
            limiter=SlidingWindowCounterRateLimiter(storage),
            redis=RedisCounts(storage=storage) if isinstance(storage, RedisStorage) else None,
        )
    return found


def ratelimits_prepare() -> None:
    """Build a Redis storage once at startup, before the server takes requests: the first one imports the Redis
    client and compiles the scripts (about a second), which on the event loop stalls every request in flight.
    It opens no connection (each event loop opens its own)."""
    if settings.OPENJEV.redis_url is not None:
        _storage_new()


async def counted[T](work: Callable[[], Awaitable[T]]) -> T:
    """`work()` against the counts, as a StorageError when Redis fails, does not answer within
    `OPENJEV_RATE_LIMIT_TIMEOUT`, or failed within the last `OUTAGE_SECONDS` (then it is not asked)."""
    if time.monotonic() < float(_outage["until"]):
        raise StorageError(ConnectionError("the rate-limit store failed moments ago"))
    try:
        async with asyncio.timeout(settings.OPENJEV.rate_limit_timeout):
            result = await work()
    except (StorageError, TimeoutError) as exc:
        _outage["until"] = time.monotonic() + OUTAGE_SECONDS
        metrics.ratelimit_store_failures_total.labels(settings.OPENJEV.rate_limit_failure).inc()
        if isinstance(exc, StorageError):
            raise
        raise StorageError(TimeoutError("the rate-limit store did not answer in time")) from None
    if _outage["logged"]:
        _outage["logged"] = False
        log.warning("rate limits are counted again")
    return result


def outage_logged(exc: StorageError) -> None:
    if not _outage["logged"]:
        _outage["logged"] = True
        log.warning(
            "rate limits cannot be counted (%s): %s",
            exc,
            "serving unlimited" if settings.OPENJEV.rate_limit_failure == "open" else "refusing requests",
        )


def failure_policy(exc: StorageError) -> None:
    """The counts cannot be read: logged once per outage; `closed` refuses (a 429, not a 5xx: nothing failed on
    the client's side), `open` lets the request through uncounted."""
    outage_logged(exc)
    if settings.OPENJEV.rate_limit_failure == "closed":
        metrics.rate_limited_total.labels("store_down").inc()
        raise ApiError(
            429, "rate_limits_unavailable", "rate limits cannot be checked right now; retry shortly", retry_in(5.0)
        ) from None

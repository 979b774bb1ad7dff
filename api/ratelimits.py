"""Per-key limits: evaluating requests and input tokens per minute, and evaluations in flight, per API key
(or per client address while no key is required), counted by the `limits` library.

With `OPENJEV_REDIS_URL` the counts live in Redis, so every process (`serve --workers N`) and every
replica shares them; without it each process counts alone. Windows are sliding-window counters: two
counters per key and window, whatever the cost (a moving window keeps one entry per token counted).
Tokens are known only once the evaluation has run, so a request is admitted while the key has tokens
left in its window and what it read is counted when it ends (at most what is left: the window is then
full until it slides), which lets one request overshoot but never lets a key keep more than its share.

Over a limit is a 429 with `retry-after` (and `-ms`) and OpenAI's `x-ratelimit-*` headers, in each route's
own error shape; the global admission limit (529: the server is full) stays as it is. Redis down:
`OPENJEV_RATE_LIMIT_FAILURE=open` serves unlimited, `closed` answers 429 (retry in 5 s); the outage is
logged once, and it is never a 5xx.

With Redis, the checks of one request are sent together and the requests of one process share pipelines
(`api/ratelimits_redis.py`): admitting a request is one round trip, counting it when it ends another.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Literal

from django.conf import settings
from limits import RateLimitItem, RateLimitItemPerMinute
from limits.aio.storage import MemoryStorage, RedisStorage, Storage
from limits.aio.strategies import SlidingWindowCounterRateLimiter
from limits.errors import StorageError

from api.errors import ApiError
from api.ratelimits_redis import RedisCounts, Refused, redis_admitted, redis_released
from api.recording import Recording
from api.requestids import client_address_current
from audit.callers import Caller, KeyLimits

log = logging.getLogger(__name__)

Counted = Literal["requests", "tokens"]
KEY_PREFIX = "openjev"
INFLIGHT_SECONDS_SLACK = 60.0
"""How long an in-flight count outlives the request timeout: a process killed mid-request frees its slot then."""


@dataclass
class _Counters:
    storage: Storage
    limiter: SlidingWindowCounterRateLimiter
    redis: RedisCounts | None
    """The batched path for a request's checks, with Redis; without it the library's calls, one by one."""


_loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Counters] = weakref.WeakKeyDictionary()
"""One storage per event loop: Redis connections belong to the loop that opened them."""
_outage: dict[str, bool] = {"logged": False}


def _storage_new() -> Storage:
    url = settings.OPENJEV.redis_url
    if url is None:
        return MemoryStorage()
    # `limits` names a Redis socket `redis+unix://`, where redis-py and the channel layer read `unix://`.
    scheme = f"async+redis+{url}" if url.startswith("unix://") else f"async+{url}"
    return RedisStorage(scheme, implementation="redispy", wrap_exceptions=True, key_prefix=KEY_PREFIX)


def _counters() -> _Counters:
    loop = asyncio.get_running_loop()
    found = _loops.get(loop)
    if found is None:
        storage = _storage_new()
        found = _loops[loop] = _Counters(
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


def subject_of(*, caller: Caller | None, address: str | None) -> str:
    """Whom the limits count: the key's public label, or the client's address while no key is required."""
    return f"key:{caller.label}" if caller is not None else f"address:{address or 'unknown'}"


def limits_for(*, caller: Caller | None) -> KeyLimits:
    config = settings.OPENJEV
    defaults = KeyLimits(
        requests_per_minute=config.key_requests_per_minute,
        tokens_per_minute=config.key_tokens_per_minute,
        concurrency=config.key_concurrency,
    )
    return defaults if caller is None else caller.limits.over(defaults)


def _duration(seconds: float) -> str:
    """OpenAI's reset format: `1s`, `6m0s`, `250ms`."""
    if seconds < 1:
        return f"{max(1, round(seconds * 1000))}ms"
    whole = math.ceil(seconds)
    return f"{whole // 60}m{whole % 60}s" if whole >= 60 else f"{whole}s"


def _limited(*, what: str, headers: dict[str, str], wait: float) -> ApiError:
    wait = max(wait, 0.001)
    return ApiError(
        429,
        "rate_limited",
        f"rate limit reached for {what}; retry in {_duration(wait)}",
        {**headers, "retry-after": str(math.ceil(wait)), "retry-after-ms": str(math.ceil(wait * 1000))},
    )


def _window_headers(*, counted: Counted, limit: int, remaining: int, reset_at: float) -> dict[str, str]:
    return {
        f"x-ratelimit-limit-{counted}": str(limit),
        f"x-ratelimit-remaining-{counted}": str(max(remaining, 0)),
        f"x-ratelimit-reset-{counted}": _duration(max(reset_at - time.time(), 0.0)),
    }


@dataclass
class Admission:
    """What one admitted request holds: its in-flight slot, and the tokens left in its window when it came."""

    subject: str
    limits: KeyLimits
    inflight: bool = False
    tokens_left: int | None = None


def _failure_policy(exc: StorageError) -> None:
    """Redis is unreachable: logged once per outage; `closed` refuses the request (503, retry later)."""
    if not _outage["logged"]:
        _outage["logged"] = True
        log.warning(
            "rate limits cannot be counted (%s): %s",
            exc,
            "serving unlimited" if settings.OPENJEV.rate_limit_failure == "open" else "refusing evaluations",
        )
    if settings.OPENJEV.rate_limit_failure == "closed":  # a 429, not a 5xx: nothing failed on the client's side
        raise ApiError(
            429,
            "rate_limits_unavailable",
            "rate limits cannot be checked right now; retry shortly",
            {"retry-after": "5", "retry-after-ms": "5000"},
        ) from None


def _counted_again() -> None:
    if _outage["logged"]:
        _outage["logged"] = False
        log.warning("rate limits are counted again")


def _inflight_key(*, subject: str) -> str:
    return f"{KEY_PREFIX}:inflight:{subject}"


def _inflight_expiry() -> int:
    return int(settings.OPENJEV.request_timeout + INFLIGHT_SECONDS_SLACK)


def _concurrency_refused(*, limits: KeyLimits) -> ApiError:
    return ApiError(
        429,
        "rate_limited",
        f"{limits.concurrency} evaluations of this key are in flight (its limit); retry when one has finished",
        {"retry-after": "1", "retry-after-ms": "1000"},
    )


def _window_refused(*, counted: Counted, limit: int, reset_at: float) -> ApiError:
    return _limited(
        what="requests" if counted == "requests" else "input tokens",
        wait=reset_at - time.time(),
        headers=_window_headers(counted=counted, limit=limit, remaining=0, reset_at=reset_at),
    )


async def _admit(*, counters: _Counters, admission: Admission) -> None:
    limits, subject = admission.limits, admission.subject
    if counters.redis is not None:
        checked = await redis_admitted(
            redis=counters.redis,
            subject=subject,
            limits=limits,
            inflight_key=_inflight_key(subject=subject),
            inflight_expiry=_inflight_expiry(),
        )
        if isinstance(checked, Refused):
            if checked.counted == "inflight":
                raise _concurrency_refused(limits=limits)
            raise _window_refused(counted=checked.counted, limit=checked.limit, reset_at=checked.reset_at)
        admission.tokens_left, admission.inflight = checked.tokens_left, checked.inflight
        return
    if limits.requests_per_minute:
        item = RateLimitItemPerMinute(limits.requests_per_minute)
        if not await counters.limiter.hit(item, subject, "requests"):
            stats = await counters.limiter.get_window_stats(item, subject, "requests")
            raise _window_refused(counted="requests", limit=item.amount, reset_at=stats.reset_time)
    if limits.tokens_per_minute:
        item = RateLimitItemPerMinute(limits.tokens_per_minute)
        stats = await counters.limiter.get_window_stats(item, subject, "tokens")
        if stats.remaining <= 0:
            raise _window_refused(counted="tokens", limit=item.amount, reset_at=stats.reset_time)
        admission.tokens_left = stats.remaining
    if limits.concurrency:
        key, expiry = _inflight_key(subject=subject), _inflight_expiry()
        admission.inflight = True
        if await counters.storage.incr(key, expiry, 1) > limits.concurrency:
            await counters.storage.incr(key, expiry, -1)
            admission.inflight = False
            raise _concurrency_refused(limits=limits)


async def _release(*, counters: _Counters, admission: Admission, tokens: int) -> None:
    limits, subject = admission.limits, admission.subject
    if counters.redis is not None:
        await redis_released(
            redis=counters.redis,
            subject=subject,
            limits=limits,
            inflight_key=_inflight_key(subject=subject) if admission.inflight else None,
            inflight_expiry=_inflight_expiry(),
            tokens=tokens,
            tokens_left=admission.tokens_left,
        )
        return
    if admission.inflight:
        await counters.storage.incr(_inflight_key(subject=subject), _inflight_expiry(), -1)
    if limits.tokens_per_minute and admission.tokens_left is not None and tokens > 0:
        item: RateLimitItem = RateLimitItemPerMinute(limits.tokens_per_minute)
        if not await counters.limiter.hit(item, subject, "tokens", cost=min(tokens, admission.tokens_left)):
            left = (await counters.limiter.get_window_stats(item, subject, "tokens")).remaining
            if left > 0:
                await counters.limiter.hit(item, subject, "tokens", cost=min(tokens, left))


@asynccontextmanager
async def rate_limited(*, call: Recording) -> AsyncIterator[None]:
    """Admit the call under its caller's limits (429 when over one), then count the input tokens it read
    and free its in-flight slot however it ends. Nothing is counted for limits that are not set."""
    limits = limits_for(caller=call.caller)
    if not (limits.requests_per_minute or limits.tokens_per_minute or limits.concurrency):
        yield
        return
    counters = _counters()
    admission = Admission(subject=subject_of(caller=call.caller, address=client_address_current()), limits=limits)
    try:
        await _admit(counters=counters, admission=admission)
    except StorageError as exc:
        _failure_policy(exc)
        admission = Admission(subject=admission.subject, limits=KeyLimits())
    else:
        _counted_again()
    try:
        yield
    finally:
        tokens = call.outcome.usage.input_tokens if call.outcome is not None else 0
        try:
            await _release(counters=counters, admission=admission, tokens=tokens)
        except StorageError as exc:
            _failure_policy_logged(exc)


def _failure_policy_logged(exc: StorageError) -> None:
    """A count that could not be written back: only logged (the answer is already decided)."""
    if not _outage["logged"]:
        _outage["logged"] = True
        log.warning("rate limits cannot be counted (%s)", exc)


_failed_recently: dict[str, float] = {}
"""Client addresses that sent a wrong key within the last minute (this process's view), so the shared count
is read before a key lookup only for them: a client with a right key pays nothing for the check."""
FAILED_ADDRESSES_MAX = 10_000


def _bad_keys_item() -> RateLimitItem:
    return RateLimitItemPerMinute(settings.OPENJEV.bad_keys_per_minute)


async def bad_keys_refused(*, address: str | None) -> None:
    """429 before any key lookup when `address` has sent too many wrong keys this minute."""
    last = _failed_recently.get(address or "")
    if address is None or last is None or time.monotonic() - last > 60:
        return
    item = _bad_keys_item()
    try:
        stats = await _counters().limiter.get_window_stats(item, f"address:{address}", "bad_keys")
    except StorageError as exc:
        _failure_policy_logged(exc)
        return
    if stats.remaining <= 0:
        raise _limited(what="wrong API keys from this address", wait=stats.reset_time - time.time(), headers={})


async def bad_key_counted(*, address: str | None) -> None:
    """Count a wrong key from `address` (never raises: the client gets its 401 whatever the count)."""
    if address is None:
        return
    if len(_failed_recently) >= FAILED_ADDRESSES_MAX:
        _failed_recently.clear()
    _failed_recently[address] = time.monotonic()
    try:
        await _counters().limiter.hit(_bad_keys_item(), f"address:{address}", "bad_keys")
    except StorageError as exc:
        _failure_policy_logged(exc)

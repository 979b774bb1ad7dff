"""Per-key limits: requests and input tokens per minute, and evaluations in flight, per API key (or per client
address while no key is required), counted by the `limits` library.

With `OPENJEV_REDIS_URL` the counts live in Redis, so every process (`serve --workers N`) and every replica
shares them; without it each process counts alone. Windows are sliding-window counters: two counters per key and
window, whatever the cost (a moving window keeps one entry per token counted).

What holds under concurrency, and why each check stands where it does:

- A request counts against its key's request limit, and takes one of its in-flight slots, before its body is
  read (`request_admitted`): an invalid request counts as any other, and a key over its limit costs the server
  nothing but the check (no parsing, no storage).
- Input tokens are reserved once they are known exactly, after tokenization and before any backend work: the
  core hands the count of prompt tokens the backend will read to `Admission.tokens_reserve`, which takes them
  from the key's window in one atomic step or refuses the request. So the tokens admitted in a window never
  exceed the limit, however many requests run at once (tokens checked before and counted after let twelve
  concurrent requests read 150 times the limit). A request larger than the whole limit is refused as too large.
  What a request read beyond its reservation (image tokens the backend expands) is counted when it ends, as
  far as the window has room.
- 0 pauses: a key whose limit is 0 gets a 429 for every request; a limit left blank takes the deployment's
  default (`OPENJEV_KEY_*`), itself unlimited when unset.

Over a limit is a 429 with `retry-after` (and `-ms`) and OpenAI's `x-ratelimit-*` headers, in each route's own
error shape; the global admission limit (529: the server is full) stays as it is. Redis down, or not answering
within `OPENJEV_RATE_LIMIT_TIMEOUT`: `OPENJEV_RATE_LIMIT_FAILURE=open` serves unlimited, `closed` answers 429
(retry in 5 s), for every throttle (the wrong-key one too); the outage is logged once, it is never a 5xx, and
for `OUTAGE_SECONDS` after a failure Redis is not asked at all, so a Redis that hangs costs a request nothing.

With Redis, the checks of one request are sent together and the requests of one process share pipelines
(`api/plumbing/ratelimits_redis.py`): admitting a request is one round trip, reserving its tokens another, ending it a
third.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Literal

from django.conf import settings
from limits import RateLimitItem, RateLimitItemPerMinute
from limits.aio.storage import MemoryStorage, RedisStorage, Storage
from limits.aio.strategies import SlidingWindowCounterRateLimiter
from limits.errors import StorageError

from api.plumbing.api_error import ApiError
from api.plumbing.ratelimits_redis import RedisCounts, Refused, redis_admitted, redis_released, redis_tokens_reserved
from audit.callers import Caller, KeyLimits
from serving import metrics

log = logging.getLogger(__name__)

Counted = Literal["requests", "tokens"]
KEY_PREFIX = "openjev"
INFLIGHT_SECONDS_SLACK = 60.0
"""How long an in-flight count outlives the request timeout: a process killed mid-request frees its slot then."""
OUTAGE_SECONDS = 2.0
"""After Redis failed or timed out, how long its counts are not asked for (the failure policy applies at once)."""


@dataclass
class _Counters:
    storage: Storage
    limiter: SlidingWindowCounterRateLimiter
    redis: RedisCounts | None
    """The batched path for a request's checks, with Redis; without it the library's calls, one by one."""


_loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Counters] = weakref.WeakKeyDictionary()
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


def _retry_in(seconds: float) -> dict[str, str]:
    seconds = max(seconds, 0.001)
    return {"retry-after": str(math.ceil(seconds)), "retry-after-ms": str(math.ceil(seconds * 1000))}


def _window_headers(*, counted: Counted, limit: int, remaining: int, reset_at: float) -> dict[str, str]:
    return {
        f"x-ratelimit-limit-{counted}": str(limit),
        f"x-ratelimit-remaining-{counted}": str(max(remaining, 0)),
        f"x-ratelimit-reset-{counted}": _duration(max(reset_at - time.time(), 0.0)),
    }


def _refused(refused: Refused) -> ApiError:
    metrics.rate_limited_total.labels(refused.counted).inc()
    if refused.counted == "inflight":
        return ApiError(
            429,
            "rate_limited",
            f"{refused.limit} evaluations of this key are in flight (its limit); retry when one has finished",
            _retry_in(1.0),
        )
    wait = refused.reset_at - time.time()
    return ApiError(
        429,
        "rate_limited",
        f"rate limit reached for {'requests' if refused.counted == 'requests' else 'input tokens'}; "
        f"retry in {_duration(max(wait, 0.001))}",
        _retry_in(wait)
        | _window_headers(counted=refused.counted, limit=refused.limit, remaining=0, reset_at=refused.reset_at),
    )


NOT_RETRIED = {"x-should-retry": "false", "retry-after": "60", "retry-after-ms": "60000"}
"""A 429 no retry can cure (a paused key, a request over the whole limit): OpenAI's SDK reads `x-should-retry`."""


def _paused(*, limits: KeyLimits) -> ApiError | None:
    """The refusal of a key paused in the admin (a limit of 0), or None."""
    zero = [
        what
        for what, value in (
            ("requests per minute", limits.requests_per_minute),
            ("input tokens per minute", limits.tokens_per_minute),
            ("concurrent evaluations", limits.concurrency),
        )
        if value == 0
    ]
    if not zero:
        return None
    metrics.rate_limited_total.labels("paused").inc()
    return ApiError(429, "rate_limited", f"this API key is paused: its limit of {zero[0]} is 0", dict(NOT_RETRIED))


def _too_large(*, tokens: int, limit: int) -> ApiError:
    """OpenAI's "request too large": no window, however empty, can hold the request."""
    metrics.rate_limited_total.labels("too_large").inc()
    return ApiError(
        429,
        "rate_limited",
        f"Request too large: it reads {tokens} input tokens, over this key's limit of {limit} input tokens per "
        "minute; send less text or fewer questions",
        dict(NOT_RETRIED) | _window_headers(counted="tokens", limit=limit, remaining=limit, reset_at=time.time()),
    )


async def _counted[T](work: Callable[[], Awaitable[T]]) -> T:
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


def _outage_logged(exc: StorageError) -> None:
    if not _outage["logged"]:
        _outage["logged"] = True
        log.warning(
            "rate limits cannot be counted (%s): %s",
            exc,
            "serving unlimited" if settings.OPENJEV.rate_limit_failure == "open" else "refusing requests",
        )


def _failure_policy(exc: StorageError) -> None:
    """The counts cannot be read: logged once per outage; `closed` refuses (a 429, not a 5xx: nothing failed on
    the client's side), `open` lets the request through uncounted."""
    _outage_logged(exc)
    if settings.OPENJEV.rate_limit_failure == "closed":
        metrics.rate_limited_total.labels("store_down").inc()
        raise ApiError(
            429, "rate_limits_unavailable", "rate limits cannot be checked right now; retry shortly", _retry_in(5.0)
        ) from None


def _inflight_key(*, subject: str) -> str:
    return f"{KEY_PREFIX}:inflight:{subject}"


def _inflight_expiry() -> int:
    return int(settings.OPENJEV.request_timeout + INFLIGHT_SECONDS_SLACK)


@dataclass
class Admission:
    """What one admitted request holds: its in-flight slot and the tokens it reserved. `tokens_reserve` is what
    the core calls with the exact count of prompt tokens, before any backend work."""

    subject: str
    limits: KeyLimits
    counters: _Counters | None = None
    """None: nothing is counted for this request (no limit set, or the counts are down and the policy is open)."""
    inflight: bool = False
    reserved: int = 0
    used: int = 0
    """Prompt tokens the backend reported reading (`tokens_used`), settled against `reserved` at the end."""
    _tokens: RateLimitItem | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.limits.tokens_per_minute:
            self._tokens = RateLimitItemPerMinute(self.limits.tokens_per_minute)

    @property
    def reserves_tokens(self) -> bool:
        return self.counters is not None and self._tokens is not None

    async def tokens_reserve(self, tokens: int) -> None:
        """Take `tokens` from the key's window, or refuse the request (429) when they do not fit now or ever."""
        if self.counters is None or self._tokens is None or tokens <= 0:
            return
        if tokens > self._tokens.amount:
            raise _too_large(tokens=tokens, limit=self._tokens.amount)
        counters, item = self.counters, self._tokens
        try:
            refused = await _counted(lambda: _tokens_take(counters=counters, subject=self.subject, item=item, n=tokens))
        except StorageError as exc:
            _failure_policy(exc)
            return
        if refused is not None:
            raise _refused(refused)
        self.reserved += tokens

    def tokens_used(self, tokens: int) -> None:
        """What the backend read, for the settling: the tokens beyond the reservation are counted at the end."""
        self.used += tokens


async def _tokens_take(*, counters: _Counters, subject: str, item: RateLimitItem, n: int) -> Refused | None:
    if counters.redis is not None:
        return await redis_tokens_reserved(redis=counters.redis, subject=subject, item=item, tokens=n)
    if await counters.limiter.hit(item, subject, "tokens", cost=n):
        return None
    stats = await counters.limiter.get_window_stats(item, subject, "tokens")
    return Refused("tokens", item.amount, stats.reset_time)


async def _admit(*, counters: _Counters, admission: Admission) -> Refused | None:
    limits, subject = admission.limits, admission.subject
    if counters.redis is not None:
        refused = await redis_admitted(
            redis=counters.redis,
            subject=subject,
            limits=limits,
            inflight_key=_inflight_key(subject=subject),
            inflight_expiry=_inflight_expiry(),
        )
        admission.inflight = bool(limits.concurrency) and refused is None
        return refused
    if limits.requests_per_minute:
        item = RateLimitItemPerMinute(limits.requests_per_minute)
        if not await counters.limiter.hit(item, subject, "requests"):
            stats = await counters.limiter.get_window_stats(item, subject, "requests")
            return Refused("requests", item.amount, stats.reset_time)
    if limits.concurrency:
        key, expiry = _inflight_key(subject=subject), _inflight_expiry()
        if await counters.storage.incr(key, expiry, 1) > limits.concurrency:
            await counters.storage.incr(key, expiry, -1)
            return Refused("inflight", limits.concurrency, time.time())
        admission.inflight = True
    return None


async def _release(*, counters: _Counters, admission: Admission) -> None:
    extra = admission.used - admission.reserved if admission.reserves_tokens else 0
    tokens = admission._tokens
    if counters.redis is not None:
        await redis_released(
            redis=counters.redis,
            subject=admission.subject,
            inflight_key=_inflight_key(subject=admission.subject) if admission.inflight else None,
            inflight_expiry=_inflight_expiry(),
            tokens=tokens,
            extra=extra,
        )
        return
    if admission.inflight:
        await counters.storage.incr(_inflight_key(subject=admission.subject), _inflight_expiry(), -1)
    if tokens is not None and extra > 0:
        left = (await counters.limiter.get_window_stats(tokens, admission.subject, "tokens")).remaining
        if left > 0:
            await counters.limiter.hit(tokens, admission.subject, "tokens", cost=min(extra, left))


@asynccontextmanager
async def request_admitted(*, caller: Caller | None, address: str | None) -> AsyncIterator[Admission]:
    """Admit a request under its caller's limits before its body is read (429 when over one, or paused), then
    free its in-flight slot and settle its tokens however it ends. Nothing is counted for limits that are not set."""
    limits = limits_for(caller=caller)
    admission = Admission(subject=subject_of(caller=caller, address=address), limits=limits)
    paused = _paused(limits=limits)
    if paused is not None:
        raise paused
    if limits.requests_per_minute or limits.tokens_per_minute or limits.concurrency:
        await _admission_counted(admission=admission, counters=_counters())
    try:
        yield admission
    finally:
        if admission.counters is not None:
            counters = admission.counters
            try:
                await _counted(lambda: _release(counters=counters, admission=admission))
            except StorageError as exc:
                _outage_logged(exc)  # the answer is decided; an in-flight slot left behind expires


async def _admission_counted(*, admission: Admission, counters: _Counters) -> None:
    """Count the request in: refused (429) when over a limit; uncounted, or refused, by the failure policy when
    the counts are down."""
    try:
        refused = await _counted(lambda: _admit(counters=counters, admission=admission))
    except StorageError as exc:
        _failure_policy(exc)
        return
    if refused is not None:
        raise _refused(refused)
    admission.counters = counters


_failed_recently: dict[str, float] = {}
"""Client addresses that sent a wrong key within the last minute (this process's view), so the shared count
is read before a key lookup only for them: a client with a right key pays nothing for the check."""
FAILED_ADDRESSES_MAX = 10_000


def _bad_keys_item() -> RateLimitItem:
    return RateLimitItemPerMinute(settings.OPENJEV.bad_keys_per_minute)


async def bad_keys_refused(*, address: str | None) -> None:
    """429 before any key lookup when `address` has sent too many wrong keys this minute (or, with the counts
    down and the `closed` policy, when it sent a wrong key within the minute)."""
    last = _failed_recently.get(address or "")
    if address is None or last is None or time.monotonic() - last > 60:
        return
    item = _bad_keys_item()
    limiter = _counters().limiter
    try:
        stats = await _counted(lambda: limiter.get_window_stats(item, f"address:{address}", "bad_keys"))
    except StorageError as exc:
        _failure_policy(exc)
        return
    if stats.remaining <= 0:
        metrics.rate_limited_total.labels("wrong_keys").inc()
        raise ApiError(
            429,
            "rate_limited",
            f"rate limit reached for wrong API keys from this address; "
            f"retry in {_duration(max(stats.reset_time - time.time(), 0.001))}",
            _retry_in(stats.reset_time - time.time()),
        )


async def bad_key_counted(*, address: str | None) -> None:
    """Count a wrong key from `address` (never raises: the client gets its 401 whatever the count)."""
    if address is None:
        return
    if len(_failed_recently) >= FAILED_ADDRESSES_MAX:
        _failed_recently.clear()
    _failed_recently[address] = time.monotonic()
    limiter = _counters().limiter
    try:
        await _counted(lambda: limiter.hit(_bad_keys_item(), f"address:{address}", "bad_keys"))
    except StorageError as exc:
        _outage_logged(exc)

"""Per-key limits: requests and input tokens per minute, and evaluations in flight, per API key (or per client
address while no key is required), counted by the `limits` library. Windows are sliding-window counters: two
counters per key and window, whatever the cost (a moving window keeps one entry per token counted). Here, each
request's admission; where the counts live, and what a Redis outage does, `api/plumbing/ratelimits_store.py`; the
429s, `api/plumbing/ratelimits_refusals.py`; the wrong-key throttle, `api/plumbing/ratelimits_bad_keys.py`.

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

With Redis, the checks of one request are sent together and the requests of one process share pipelines
(`api/plumbing/ratelimits_redis.py`): admitting a request is one round trip, reserving its tokens another, ending it a
third.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from django.conf import settings
from limits import RateLimitItem, RateLimitItemPerMinute
from limits.errors import StorageError

from api.plumbing.ratelimits_redis import Refused, redis_admitted, redis_released, redis_tokens_reserved
from api.plumbing.ratelimits_refusals import key_paused, limit_refused, request_too_large
from api.plumbing.ratelimits_store import KEY_PREFIX, Counters, counted, failure_policy, loop_counters, outage_logged
from audit.callers import Caller, KeyLimits

INFLIGHT_SECONDS_SLACK = 60.0
"""How long an in-flight count outlives the request timeout: a process killed mid-request frees its slot then."""


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
    counters: Counters | None = None
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
            raise request_too_large(tokens=tokens, limit=self._tokens.amount)
        counters, item = self.counters, self._tokens
        try:
            refused = await counted(lambda: _tokens_take(counters=counters, subject=self.subject, item=item, n=tokens))
        except StorageError as exc:
            failure_policy(exc)
            return
        if refused is not None:
            raise limit_refused(refused)
        self.reserved += tokens

    def tokens_used(self, tokens: int) -> None:
        """What the backend read, for the settling: the tokens beyond the reservation are counted at the end."""
        self.used += tokens


async def _tokens_take(*, counters: Counters, subject: str, item: RateLimitItem, n: int) -> Refused | None:
    if counters.redis is not None:
        return await redis_tokens_reserved(redis=counters.redis, subject=subject, item=item, tokens=n)
    if await counters.limiter.hit(item, subject, "tokens", cost=n):
        return None
    stats = await counters.limiter.get_window_stats(item, subject, "tokens")
    return Refused("tokens", item.amount, stats.reset_time)


async def _admit(*, counters: Counters, admission: Admission) -> Refused | None:
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


async def _release(*, counters: Counters, admission: Admission) -> None:
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
    paused = key_paused(limits=limits)
    if paused is not None:
        raise paused
    if limits.requests_per_minute or limits.tokens_per_minute or limits.concurrency:
        await _admission_counted(admission=admission, counters=loop_counters())
    try:
        yield admission
    finally:
        if admission.counters is not None:
            counters = admission.counters
            try:
                await counted(lambda: _release(counters=counters, admission=admission))
            except StorageError as exc:
                outage_logged(exc)  # the answer is decided; an in-flight slot left behind expires


async def _admission_counted(*, admission: Admission, counters: Counters) -> None:
    """Count the request in: refused (429) when over a limit; uncounted, or refused, by the failure policy when
    the counts are down."""
    try:
        refused = await counted(lambda: _admit(counters=counters, admission=admission))
    except StorageError as exc:
        failure_policy(exc)
        return
    if refused is not None:
        raise limit_refused(refused)
    admission.counters = counters

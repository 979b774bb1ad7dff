"""The wrong-key throttle: a client address that sent too many wrong API keys this minute
(`OPENJEV_BAD_KEYS_PER_MINUTE`) is refused (429) before any key lookup, so a refused address learns nothing of
a guess. The wrong keys are counted in the per-key limits' store (`api/plumbing/ratelimits_store.py`: with Redis,
shared by every process), under its failure policy; the addresses this process saw send one are remembered here, so a
client with a right key pays nothing for the check.
"""

from __future__ import annotations

import time

from django.conf import settings
from limits import RateLimitItem, RateLimitItemPerMinute
from limits.errors import StorageError

from api.plumbing.api_error import ApiError
from api.plumbing.ratelimits_refusals import duration, retry_in
from api.plumbing.ratelimits_store import counted, failure_policy, loop_counters, outage_logged
from serving import metrics

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
    limiter = loop_counters().limiter
    try:
        stats = await counted(lambda: limiter.get_window_stats(item, f"address:{address}", "bad_keys"))
    except StorageError as exc:
        failure_policy(exc)
        return
    if stats.remaining <= 0:
        metrics.rate_limited_total.labels("wrong_keys").inc()
        raise ApiError(
            429,
            "rate_limited",
            f"rate limit reached for wrong API keys from this address; "
            f"retry in {duration(max(stats.reset_time - time.time(), 0.001))}",
            retry_in(stats.reset_time - time.time()),
        )


async def bad_key_counted(*, address: str | None) -> None:
    """Count a wrong key from `address` (never raises: the client gets its 401 whatever the count)."""
    if address is None:
        return
    if len(_failed_recently) >= FAILED_ADDRESSES_MAX:
        _failed_recently.clear()
    _failed_recently[address] = time.monotonic()
    limiter = loop_counters().limiter
    try:
        await counted(lambda: limiter.hit(_bad_keys_item(), f"address:{address}", "bad_keys"))
    except StorageError as exc:
        outage_logged(exc)

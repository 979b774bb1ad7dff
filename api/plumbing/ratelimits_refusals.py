"""The 429s of the per-key limits (`api/plumbing/ratelimits.py`), built in one place so every route sends the same
headers: `retry-after` (and `-ms`) and OpenAI's `x-ratelimit-*` for a window that is full, and `x-should-retry: false`
where no retry can cure the refusal (a paused key, a request larger than the whole limit), which OpenAI's SDK reads.
Each route renders them in its own error shape; the global admission limit (529: the server is full) stays as it is.
"""

from __future__ import annotations

import math
import time
from typing import Literal

from api.plumbing.api_error import ApiError
from api.plumbing.ratelimits_redis import Refused
from audit.callers import KeyLimits
from serving import metrics

Counted = Literal["requests", "tokens"]


def duration(seconds: float) -> str:
    """OpenAI's reset format: `1s`, `6m0s`, `250ms`."""
    if seconds < 1:
        return f"{max(1, round(seconds * 1000))}ms"
    whole = math.ceil(seconds)
    return f"{whole // 60}m{whole % 60}s" if whole >= 60 else f"{whole}s"


def retry_in(seconds: float) -> dict[str, str]:
    seconds = max(seconds, 0.001)
    return {"retry-after": str(math.ceil(seconds)), "retry-after-ms": str(math.ceil(seconds * 1000))}


def _window_headers(*, counted: Counted, limit: int, remaining: int, reset_at: float) -> dict[str, str]:
    return {
        f"x-ratelimit-limit-{counted}": str(limit),
        f"x-ratelimit-remaining-{counted}": str(max(remaining, 0)),
        f"x-ratelimit-reset-{counted}": duration(max(reset_at - time.time(), 0.0)),
    }


def limit_refused(refused: Refused) -> ApiError:
    metrics.rate_limited_total.labels(refused.counted).inc()
    if refused.counted == "inflight":
        return ApiError(
            429,
            "rate_limited",
            f"{refused.limit} evaluations of this key are in flight (its limit); retry when one has finished",
            retry_in(1.0),
        )
    wait = refused.reset_at - time.time()
    return ApiError(
        429,
        "rate_limited",
        f"rate limit reached for {'requests' if refused.counted == 'requests' else 'input tokens'}; "
        f"retry in {duration(max(wait, 0.001))}",
        retry_in(wait)
        | _window_headers(counted=refused.counted, limit=refused.limit, remaining=0, reset_at=refused.reset_at),
    )


NOT_RETRIED = {"x-should-retry": "false", "retry-after": "60", "retry-after-ms": "60000"}
"""A 429 no retry can cure (a paused key, a request over the whole limit): OpenAI's SDK reads `x-should-retry`."""


def key_paused(*, limits: KeyLimits) -> ApiError | None:
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


def request_too_large(*, tokens: int, limit: int) -> ApiError:
    """OpenAI's "request too large": no window, however empty, can hold the request."""
    metrics.rate_limited_total.labels("too_large").inc()
    return ApiError(
        429,
        "rate_limited",
        f"Request too large: it reads {tokens} input tokens, over this key's limit of {limit} input tokens per "
        "minute; send less text or fewer questions",
        dict(NOT_RETRIED) | _window_headers(counted="tokens", limit=limit, remaining=limit, reset_at=time.time()),
    )

"""Issued API keys: `oj_<prefix>_<secret>`, stored as a visible prefix and a SHA-256 of the whole key.

The secret has ~238 random bits, so a fast hash is as good as a slow one against guessing and keeps
verification cheap; the database never holds anything that authenticates. Verification looks the
row up by prefix (not secret) and compares hashes with `hmac.compare_digest`, so timing reveals
nothing about the secret. Rows are cached in-process for `CACHE_SECONDS`, so the hot path makes no
database call for a key in use; a revocation is seen at once by this process and within
`CACHE_SECONDS` by the others. `last_used_at` is written at most once a minute per key, by the
storage writer thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
import string
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import connections
from django.utils import timezone

from evaluations.errors import ApiError

log = logging.getLogger(__name__)

KEY_SCHEME = "oj"
PREFIX_LENGTH = 8
SECRET_LENGTH = 40
CACHE_SECONDS = 30.0
CACHE_MAX = 4096
TOUCH_SECONDS = 60.0
_PREFIX_ALPHABET = string.ascii_lowercase + string.digits
_SECRET_ALPHABET = string.ascii_letters + string.digits


@dataclass(frozen=True)
class IssuedKey:
    """A freshly issued key: `secret` is the only copy of the full key and must be shown exactly once."""

    id: int
    label: str
    secret: str


@dataclass(frozen=True)
class _KeyRow:
    id: int
    label: str
    secret_hash: str
    expires_at: datetime | None
    revoked: bool


_cache: dict[str, tuple[float, _KeyRow | None]] = {}
_touched: dict[int, float] = {}
_lock = threading.Lock()


def apikey_hash(*, secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def apikey_prefix_parse(*, secret: str) -> str | None:
    """The prefix of a well-formed issued key, else None (so malformed keys never reach the database)."""
    parts = secret.split("_")
    if len(parts) != 3 or parts[0] != KEY_SCHEME:
        return None
    prefix, body = parts[1], parts[2]
    if len(prefix) != PREFIX_LENGTH or len(body) != SECRET_LENGTH:
        return None
    if not all(c in _PREFIX_ALPHABET for c in prefix) or not body.isascii() or not body.isalnum():
        return None
    return prefix


def apikey_secret_new() -> tuple[str, str]:
    """A fresh (prefix, full key) pair with a prefix no stored key uses (sync ORM)."""
    from evaluations.models import ApiKey

    for _ in range(5):
        prefix = "".join(secrets.choice(_PREFIX_ALPHABET) for _ in range(PREFIX_LENGTH))
        if not ApiKey.objects.filter(prefix=prefix).exists():
            break
    else:  # pragma: no cover - 36^8 prefixes
        raise RuntimeError("could not find a free key prefix")
    body = "".join(secrets.choice(_SECRET_ALPHABET) for _ in range(SECRET_LENGTH))
    return prefix, f"{KEY_SCHEME}_{prefix}_{body}"


def apikey_issue(*, name: str, owner: str = "", expires_at: datetime | None = None) -> IssuedKey:
    """Create a key (sync ORM: admin, shell). The returned secret is not stored anywhere."""
    from evaluations.models import ApiKey

    prefix, secret = apikey_secret_new()
    key = ApiKey(name=name, owner=owner, prefix=prefix, secret_hash=apikey_hash(secret=secret), expires_at=expires_at)
    key.save()
    return IssuedKey(id=key.pk, label=key.label, secret=secret)


def apikey_revoke(*, ids: Iterable[int]) -> int:
    """Revoke keys now (sync ORM); this process stops accepting them immediately."""
    from evaluations.models import ApiKey

    keys = ApiKey.objects.filter(pk__in=list(ids), revoked_at__isnull=True)
    prefixes = list(keys.values_list("prefix", flat=True))
    count = keys.update(revoked_at=timezone.now())
    for prefix in prefixes:
        apikey_cache_forget(prefix=prefix)
    return count


def apikey_cache_forget(*, prefix: str | None = None) -> None:
    """Drop cached rows (one prefix, or all) so the next request reads the database."""
    with _lock:
        if prefix is None:
            _cache.clear()
            _touched.clear()
        else:
            _cache.pop(prefix, None)


def _row_fetch(prefix: str) -> _KeyRow | None:
    """Runs in a worker thread; closes its connection so no thread keeps one open between lookups."""
    from evaluations.models import ApiKey

    try:
        key = ApiKey.objects.filter(prefix=prefix).first()
    finally:
        connections.close_all()
    if key is None:
        return None
    return _KeyRow(id=key.pk, label=key.label, secret_hash=key.secret_hash, expires_at=key.expires_at,
                   revoked=key.revoked_at is not None)


async def _row_get(prefix: str) -> _KeyRow | None:
    now = time.monotonic()
    cached = _cache.get(prefix)
    if cached is not None and now - cached[0] < CACHE_SECONDS:
        return cached[1]
    try:
        row = await asyncio.to_thread(_row_fetch, prefix)
    except Exception:
        log.exception("API key lookup failed")
        raise ApiError(503, "service_unavailable", "API keys cannot be checked right now; retry shortly",
                       {"Retry-After": "5"}) from None
    with _lock:
        if len(_cache) >= CACHE_MAX:  # random well-formed keys must not grow the cache without bound
            for stale in [p for p, (at, _) in _cache.items() if now - at >= CACHE_SECONDS]:
                del _cache[stale]
            if len(_cache) >= CACHE_MAX:
                _cache.clear()
        _cache[prefix] = (now, row)
    return row


def _touch(row: _KeyRow, now: datetime) -> None:
    """Queue a last-used update unless this process sent one for the key within the last minute."""
    tick = time.monotonic()
    with _lock:
        last = _touched.get(row.id)
        if last is not None and tick - last < TOUCH_SECONDS:
            return
        _touched[row.id] = tick
    from evaluations.storage import apikey_touch_enqueue

    apikey_touch_enqueue(key_id=row.id, when=now)


async def apikey_verify(*, secret: str) -> str | None:
    """The key's label if `secret` is an active issued key, else None."""
    prefix = apikey_prefix_parse(secret=secret)
    if prefix is None:
        return None
    row = await _row_get(prefix)
    if row is None:
        return None
    if not hmac.compare_digest(apikey_hash(secret=secret), row.secret_hash):
        return None
    now = timezone.now()
    if row.revoked or (row.expires_at is not None and row.expires_at <= now):
        return None
    _touch(row, now)
    return row.label

"""Issued API keys: `oj_<prefix>_<secret>`, stored as a visible prefix and a SHA-256 of the whole key.

The secret has ~238 random bits, so a fast hash is as good as a slow one against guessing and keeps
verification cheap; the database never holds anything that authenticates. Verification looks the
row up by prefix (not secret) and compares hashes with `hmac.compare_digest`, so timing reveals
nothing about the secret. Rows are cached in-process and refreshed off the request path every
`KEY_CACHE_SECONDS` (every key in use in one query: `serving.refresher`), so the hot path makes no database
call for a key it has seen, and a database that is down or frozen keeps the keys it knew accepted (and the
revocations it knew refused); a revocation is seen at once by this process (the signal receivers forget the
row) and within `KEY_CACHE_SECONDS` by the others. A key this process has not seen is read at once, for at most
`serving.refreshed.REQUEST_WAIT_SECONDS` (none while the database is known down): `KeysUnavailable`, a 503.
`last_used_at` is written at most once a minute per key, by the storage writer thread, never on the event loop.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import string
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connections
from django.db.models import Q
from django.utils import timezone

from audit.callers import Caller, KeyLimits
from audit.database import refreshed
from audit.models import ApiKey
from audit.storage.writer import writer, writes_tried
from serving.refreshed import Unavailable

log = logging.getLogger(__name__)


class KeysUnavailable(Exception):
    """The key table cannot be read: the caller's key can be neither accepted nor refused (the API
    answers 503 and the client retries; logged here once with its cause)."""


KEY_SCHEME = "oj"
PREFIX_LENGTH = 8
SECRET_LENGTH = 40
KEY_CACHE_SECONDS = 30.0
KEY_CACHE_MAX = 4096
KEY_IDLE_SECONDS = 600.0
"""A key no request used for this long leaves the cache (and the refresh's query)."""
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
    limits: KeyLimits


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
    prefix, secret = apikey_secret_new()
    key = ApiKey(name=name, owner=owner, prefix=prefix, secret_hash=apikey_hash(secret=secret), expires_at=expires_at)
    key.save()
    return IssuedKey(id=key.pk, label=key.label, secret=secret)


def apikey_revoke(*, ids: Iterable[int]) -> int:
    """Revoke keys now (sync ORM); this process stops accepting them immediately."""
    keys = ApiKey.objects.filter(pk__in=list(ids), revoked_at__isnull=True)
    prefixes = list(keys.values_list("prefix", flat=True))
    count = keys.update(revoked_at=timezone.now())
    for prefix in prefixes:
        apikey_cache_forget(prefix=prefix)
    return count


def apikey_cache_forget(*, prefix: str | None = None) -> None:
    """Drop cached rows (one prefix, or all) so the next request reads the database."""
    _cache.forget(prefix)
    if prefix is None:
        with _lock:
            _touched.clear()


def _rows_fetch(prefixes: list[str]) -> dict[str, _KeyRow | None]:
    """The rows of these prefixes (None: no such key), in one query, on the refresh thread."""
    found: dict[str, _KeyRow | None] = dict.fromkeys(prefixes)
    for key in ApiKey.objects.filter(prefix__in=prefixes):
        found[key.prefix] = _KeyRow(
            id=key.pk,
            label=key.label,
            secret_hash=key.secret_hash,
            expires_at=key.expires_at,
            revoked=key.revoked_at is not None,
            limits=KeyLimits(
                requests_per_minute=key.requests_per_minute,
                tokens_per_minute=key.tokens_per_minute,
                concurrency=key.concurrency,
            ),
        )
    return found


_cache = refreshed(
    name="api_keys",
    fetch=lambda prefixes: _rows_fetch(prefixes),  # looked up at each call: tests count the reads
    every=KEY_CACHE_SECONDS,
    idle=KEY_IDLE_SECONDS,
    max_entries=KEY_CACHE_MAX,
)


async def _row_get(prefix: str) -> _KeyRow | None:
    try:
        return await _cache.load(prefix)
    except Unavailable:
        raise KeysUnavailable from None  # the outage is logged once, by the refresh thread


def _touch(row: _KeyRow, now: datetime) -> None:
    """Queue a last-used update unless this process sent one for the key within the last minute."""
    tick = time.monotonic()
    with _lock:
        last = _touched.get(row.id)
        if last is not None and tick - last < TOUCH_SECONDS:
            return
        _touched[row.id] = tick
    try:
        writer.submit(sink=touches, job=_Touch(key_id=row.id, when=now))
    except Exception:
        log.exception("could not queue an API key last-used update")


@dataclass(frozen=True)
class _Touch:
    key_id: int
    when: datetime


class TouchSink:
    """The storage writer's sink for `last_used_at`: one UPDATE per key per batch, only when the stored
    value is older than `TOUCH_SECONDS` (several processes may report the same key)."""

    name = "api-key-touches"

    def write(self, jobs: list[_Touch]) -> int:
        latest: dict[int, datetime] = {}
        for job in jobs:
            latest[job.key_id] = max(job.when, latest.get(job.key_id, job.when))

        def update() -> None:
            for key_id, when in latest.items():
                stale = Q(last_used_at__isnull=True) | Q(last_used_at__lt=when - timedelta(seconds=TOUCH_SECONDS))
                ApiKey.objects.filter(stale, pk=key_id).update(last_used_at=when)

        try:
            written = writes_tried(update, what="API key last-use updates")
        except Exception:
            log.warning("could not record last use of %d API key(s)", len(latest), exc_info=True)
            connections.close_all()
            return 0
        return len(jobs) if written else 0


touches = TouchSink()


async def apikey_verify(*, secret: str) -> Caller | None:
    """Who `secret` authenticates if it is an active issued key, else None; `KeysUnavailable` when the
    key table cannot be read (the request cannot be authenticated either way)."""
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
    return Caller(label=row.label, key_id=row.id, limits=row.limits)

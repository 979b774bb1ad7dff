"""Stream sockets counted per subject, so no caller takes every socket of the process.

A socket counts for its key once it authenticated (`key:` and the key's label), for its address while auth is off
(`address:`), and, while it waits for an auth message, for its address among the sockets still waiting (`waiting:`):
each subject holds at most `OPENJEV_MAX_WEBSOCKETS_PER_KEY`. Sockets that wait for their key never refuse one that
brings it: one over its address's share makes the longest waiting socket of that address give way (closed with
4429) instead of being refused itself, so an address holding its share of key-less sockets cannot keep a valid
key's socket out, whose auth message comes at once, while what it holds stays bounded.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable

from django.conf import settings

WAITING_PREFIX = "waiting:"

_shares: Counter[str] = Counter()
"""Sockets open in this process per subject."""
_waiting: dict[str, dict[Hashable, Callable[[], None]]] = {}
"""Per `waiting:` subject, the sockets waiting for their key, longest waiting first, each with what closes it."""


def waiting_subject(*, address: str | None) -> str:
    return f"{WAITING_PREFIX}{address or 'unknown'}"


def socket_share_take(*, subject: str) -> bool:
    """Count one more socket for `subject`, unless it already holds `OPENJEV_MAX_WEBSOCKETS_PER_KEY`."""
    if _shares[subject] >= settings.OPENJEV.max_websockets_per_key:
        return False
    _shares[subject] += 1
    return True


def socket_wait(*, subject: str, holder: Hashable, give_way: Callable[[], None]) -> None:
    """Count `holder` among the sockets waiting for their key under `subject`; when the subject holds its share,
    the longest waiting one gives its place (`give_way`, which closes it) to `holder`."""
    holders = _waiting.setdefault(subject, {})
    if not socket_share_take(subject=subject):
        oldest = next(iter(holders))
        holders.pop(oldest)()
    holders[holder] = give_way


def socket_share_return(*, subject: str, holder: Hashable) -> None:
    """`holder`'s socket no longer counts for `subject` (closed, or moved to the key it authenticated with); a
    waiting socket that gave its place away has nothing to return."""
    holders = _waiting.get(subject)
    if holders is not None or subject.startswith(WAITING_PREFIX):
        if holders is None or holders.pop(holder, None) is None:
            return
        if not holders:
            del _waiting[subject]
    _shares[subject] -= 1
    if _shares[subject] <= 0:
        del _shares[subject]

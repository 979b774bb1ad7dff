"""Who a batch belongs to: the caller its lines are answered for, with its key's limits as they are now."""

from __future__ import annotations

from audit.callers import Caller, KeyLimits
from audit.models import ApiKey

KEY_LABEL_PREFIX = "oj_"


def owner_of(*, caller: Caller | None) -> str:
    """The owner a caller's files and batches are stored under: its key's public label ("" with auth off)."""
    return caller.label if caller is not None else ""


def caller_of_owner(*, owner: str) -> Caller | None:
    """The caller a batch's lines run as: its issued key (limits read afresh, so a key paused or tightened since
    the batch began holds its lines back), the environment's key, or nobody with auth off."""
    if not owner:
        return None
    if not owner.startswith(KEY_LABEL_PREFIX):
        return Caller(label=owner)
    key = ApiKey.objects.filter(prefix=owner.removeprefix(KEY_LABEL_PREFIX)).first()
    if key is None:
        return Caller(label=owner, limits=KeyLimits(requests_per_minute=0))
    return Caller(
        label=owner,
        key_id=key.pk,
        limits=KeyLimits(
            requests_per_minute=key.requests_per_minute if key.is_active() else 0,
            tokens_per_minute=key.tokens_per_minute,
            concurrency=key.concurrency,
        ),
    )

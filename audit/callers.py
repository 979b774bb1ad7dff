"""Who made a request, as the API authenticates it and storage records it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KeyLimits:
    """What one caller may use; None: the deployment's default (`OPENJEV_KEY_*`), itself None for unlimited;
    0: nothing (the key is paused)."""

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    """Input tokens the backend reads for the caller, per minute."""
    concurrency: int | None = None
    """Evaluations in flight at once."""

    def over(self, defaults: KeyLimits) -> KeyLimits:
        """These limits, each unset one (None, not 0: 0 pauses) taken from `defaults`."""
        return KeyLimits(
            requests_per_minute=_or(self.requests_per_minute, defaults.requests_per_minute),
            tokens_per_minute=_or(self.tokens_per_minute, defaults.tokens_per_minute),
            concurrency=_or(self.concurrency, defaults.concurrency),
        )


def _or(value: int | None, default: int | None) -> int | None:
    return default if value is None else value


@dataclass(frozen=True)
class Caller:
    """Who made a request, as evaluations record it: an issued key (its row and its public label
    `oj_<prefix>`), the environment's key (`env`), the admin's "try it" (`admin`)."""

    label: str
    key_id: int | None = None
    limits: KeyLimits = KeyLimits()
    """The key's own limits, set in the admin."""

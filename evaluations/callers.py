"""Who made a request, as the API authenticates it and storage records it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Caller:
    """Who made a request, as evaluations record it: an issued key (its row and its public label
    `oj_<prefix>`), the environment's key (`env`), the admin's "try it" (`admin`)."""

    label: str
    key_id: int | None = None

"""What the fake keeps of its /generate calls: one record per call, and the in-flight calls by rid."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, TypedDict


class RequestRecord(TypedDict):
    """One /generate call as the fake saw it; times are ``time.monotonic()`` seconds."""

    path: str
    headers: dict[str, str]
    """Its request headers, names in lowercase (a later one of the same name wins)."""
    body: Any
    t_start: float
    t_end: float | None
    status: int | None


@dataclass(slots=True)
class Call:
    """An in-flight /generate call, reachable by any of its rids so /abort_request can end it."""

    rids: list[str]
    aborted: set[str] = field(default_factory=set)
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def abort(self, rid: str) -> None:
        self.aborted.add(rid)
        if self.aborted.issuperset(self.rids):
            self.done.set()

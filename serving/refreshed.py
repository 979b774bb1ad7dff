"""A cache of values the request path reads from the database (API keys, calibrations, classifiers, the batch
figures of a scrape), read and refreshed by the process's refresh thread (`serving.refresher`), never by a request.

A request takes what a cache holds at any age (`Refreshed.get`), so a database that is slow, frozen or gone never
delays it: the last good value serves until a refresh succeeds, and its age is on `/health` and in
`openjev_cache_updated_timestamp_seconds`. Only a value the process has never read (a key first seen, the first
request after a start or a save) makes a request wait, for at most `REQUEST_WAIT_SECONDS`
(`Refreshed.load`); while the database is known to be down (`serving.outage`), not at all: the caller answers its
documented fallback at once (a 503 for a key, uncalibrated answers, no classifiers). No Django.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Protocol

from serving import metrics

REQUEST_WAIT_SECONDS = 2.0
"""The most a request waits for a value its process has never read (a connect timeout's worth)."""
FETCH_KEYS_MAX = 500
"""Keys read in one query (SQLite binds at most 999 values a statement)."""
PENDING_MAX = 2048
"""Misses waiting for the thread at once; beyond that a miss is refused at once (a flood of made-up keys)."""


class Thread(Protocol):
    """What a cache asks of the refresh thread (`serving.refresher.Refresher`)."""

    def register(self, cache: Refreshed[Any, Any]) -> None: ...

    def running(self) -> None: ...

    def attempt_possible(self) -> bool: ...

    def wake(self) -> None: ...


class Unavailable(Exception):
    """The value cannot be read now: the database is down or slow, and this process holds no last good value."""


@dataclass
class Entry[V]:
    value: V
    read_at: float
    """`time.time()` when the database gave it."""
    used_at: float
    """`time.monotonic()` when a request last took it."""


class Refreshed[K: Hashable, V]:
    """One cache: `fetch(keys)` reads the values of those keys (every key asked, None for a row that is not
    there) on the refresher's thread; requests read it with `get` and `load`."""

    def __init__(
        self,
        *,
        name: str,
        fetch: Callable[[list[K]], dict[K, V]],
        every: float,
        idle: float,
        max_entries: int,
        refresher: Thread,
    ) -> None:
        self.name = name
        self.every = every
        self.idle = idle
        self.max_entries = max_entries
        self._fetch = fetch
        self._refresher = refresher
        self._lock = threading.Lock()
        self._entries: dict[K, Entry[V]] = {}
        self._pending: dict[K, concurrent.futures.Future[V]] = {}
        self._generation = 0
        self._round_at = 0.0
        refresher.register(self)

    # -- the request path ----------------------------------------------------------------------------------

    def get(self, key: K) -> Entry[V] | None:
        """The last good value of `key` at any age, or None when this process has none. Never blocks."""
        self._refresher.running()
        entry = self._entries.get(key)
        if entry is not None:
            entry.used_at = time.monotonic()
        return entry

    def miss(self, key: K) -> concurrent.futures.Future[V]:
        """A future resolved with `key`'s value once the thread has read it, or failed with `Unavailable` (at once
        while the database is known down)."""
        with self._lock:
            found = self._pending.get(key)
            if found is not None:
                return found
            future: concurrent.futures.Future[V] = concurrent.futures.Future()
            if len(self._pending) >= PENDING_MAX:
                future.set_exception(Unavailable(f"{self.name}: too many reads waiting"))
                return future
            if not self._refresher.attempt_possible():
                future.set_exception(Unavailable(f"{self.name}: the database is down"))
                return future
            self._pending[key] = future
        self._refresher.wake()
        return future

    async def load(self, key: K) -> V:
        """`key`'s value: the last good one, else read now for at most `REQUEST_WAIT_SECONDS`; `Unavailable`."""
        entry = self.get(key)
        if entry is not None:
            return entry.value
        try:  # shielded: the read is shared with every request that missed the same key, and goes on for them
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(self.miss(key))), REQUEST_WAIT_SECONDS)
        except TimeoutError:
            raise Unavailable(f"{self.name}: the database did not answer within {REQUEST_WAIT_SECONDS:g} s") from None

    def load_blocking(self, key: K) -> V:
        """`load` for a worker thread (a scrape)."""
        entry = self.get(key)
        if entry is not None:
            return entry.value
        try:
            return self.miss(key).result(timeout=REQUEST_WAIT_SECONDS)
        except concurrent.futures.TimeoutError:
            raise Unavailable(f"{self.name}: the database did not answer within {REQUEST_WAIT_SECONDS:g} s") from None

    def forget(self, key: K | None = None) -> None:
        """Drop one entry, or all (a save in this process); a round already reading does not bring it back."""
        with self._lock:
            self._generation += 1
            if key is None:
                self._entries.clear()
            else:
                self._entries.pop(key, None)
        self._published()

    @property
    def read_at(self) -> float | None:
        """`time.time()` when the oldest value this cache serves was read; None when it holds none."""
        entries = list(self._entries.values())
        return min(e.read_at for e in entries) if entries else None

    # -- the refresher's thread ----------------------------------------------------------------------------

    def due_in(self, now: float) -> float | None:
        """Seconds until this cache needs a round (0: now); None while it holds nothing and nothing waits."""
        if self._pending:
            return 0.0
        if not self._entries:
            return None
        return max(0.0, self._round_at + self.every - now)

    def refresh(self) -> bool:
        """One round: the misses and, when due, every entry in use (the idle ones dropped). False when there was
        nothing to read (no query made). Raises what `fetch` raises; the misses then fail with `Unavailable`."""
        now = time.monotonic()
        with self._lock:
            generation = self._generation
            wanted = list(self._pending)[:FETCH_KEYS_MAX]
            if now >= self._round_at + self.every:
                self._round_at = now
                for key in [k for k, e in self._entries.items() if now - e.used_at > self.idle]:
                    del self._entries[key]
                wanted += [k for k in self._entries if k not in self._pending][: FETCH_KEYS_MAX - len(wanted)]
        if not wanted:
            self._published()
            return False
        try:
            found = self._fetch(wanted)
        except BaseException as exc:
            self._misses_failed(wanted, exc)
            raise
        self._installed(found, wanted=wanted, generation=generation)
        return True

    def _installed(self, found: dict[K, V], *, wanted: list[K], generation: int) -> None:
        now, wall = time.monotonic(), time.time()
        with self._lock:
            if generation != self._generation:  # forgotten meanwhile: what was read may be what was forgotten
                return
            for key in wanted:
                old = self._entries.get(key)
                self._entries[key] = Entry(found.get(key), wall, old.used_at if old else now)  # type: ignore[arg-type]
            if len(self._entries) > self.max_entries:
                # The least recently used go first, rows that are not there (None: made-up keys) before any that
                # are, so a flood of unknown keys cannot push out the keys in use (served while the database is down).
                by_use = sorted(
                    self._entries, key=lambda k: (self._entries[k].value is not None, self._entries[k].used_at)
                )
                for key in by_use[: len(self._entries) - self.max_entries]:
                    del self._entries[key]
            waiting = [(k, self._pending.pop(k)) for k in wanted if k in self._pending]
        self._published()
        for key, future in waiting:
            if not future.done():
                future.set_result(found.get(key))  # type: ignore[arg-type]

    def _misses_failed(self, wanted: list[K], exc: BaseException) -> None:
        with self._lock:
            self._round_at = 0.0  # tried again at the next back-off step, not only after `every`
            waiting = [self._pending.pop(k) for k in wanted if k in self._pending]
        for future in waiting:
            if not future.done():
                future.set_exception(Unavailable(f"{self.name}: {type(exc).__name__}"))

    def misses_refused(self) -> None:
        """The database is down and no attempt is due: every waiting miss fails now."""
        with self._lock:
            waiting, self._pending = list(self._pending.values()), {}
        for future in waiting:
            if not future.done():
                future.set_exception(Unavailable(f"{self.name}: the database is down"))

    def after_fork(self) -> None:
        """In a forked child: the parent's lock may have been held by its thread, and its misses wait there."""
        self._lock = threading.Lock()
        self._pending = {}

    def _published(self) -> None:
        read_at = self.read_at
        metrics.cache_updated_timestamp.labels(self.name).set(float("inf") if read_at is None else read_at)

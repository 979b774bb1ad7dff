"""A small in-process cache of database reads on the request path (API keys, classifiers).

Entries expire after `seconds`, so other processes' changes are seen within that time; `forget` (called
by the signal receivers when a row is saved or deleted here) drops entries at once, and also stops a
read that started before it from installing what it read, which would bring the old row back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass


@dataclass(frozen=True)
class Cached[V]:
    """A hit: `value` may itself be None (a key that does not exist is worth remembering too)."""

    value: V


class TtlCache[K: Hashable, V]:
    def __init__(self, *, seconds: float, max_entries: int) -> None:
        self.seconds = seconds
        self.max_entries = max_entries
        self._entries: dict[K, tuple[float, V]] = {}
        self._generation = 0
        self._lock = threading.Lock()
        self._fetch_lock = threading.Lock()

    def load(self, key: K, fetch: Callable[[], V]) -> V:
        """The fresh entry, or `fetch()` remembered: one fetch at a time, so callers that waited for it
        find its result instead of querying again (blocking: call it from a worker thread)."""
        with self._fetch_lock:
            cached = self.get(key)
            if cached is not None:
                return cached.value
            generation = self.generation()
            found = fetch()
            self.put(key, found, generation=generation)
            return found

    def get(self, key: K) -> Cached[V] | None:
        """The entry for `key` while it is fresh, else None."""
        found = self._entries.get(key)
        if found is None or time.monotonic() - found[0] >= self.seconds:
            return None
        return Cached(found[1])

    def generation(self) -> int:
        """Take this before reading the database; `put` it back with the result."""
        return self._generation

    def put(self, key: K, value: V, *, generation: int) -> None:
        """Remember `value`, unless something was forgotten since `generation` was taken. A full cache
        first drops its expired entries, then everything (random keys must not grow it without bound)."""
        now = time.monotonic()
        with self._lock:
            if generation != self._generation:
                return
            if key not in self._entries and len(self._entries) >= self.max_entries:
                for stale in [k for k, (at, _) in self._entries.items() if now - at >= self.seconds]:
                    del self._entries[stale]
                if len(self._entries) >= self.max_entries:
                    self._entries.clear()
            self._entries[key] = (now, value)

    def forget(self, key: K | None = None) -> None:
        """Drop one entry, or all of them."""
        with self._lock:
            self._generation += 1
            if key is None:
                self._entries.clear()
            else:
                self._entries.pop(key, None)

"""A least-recently-used map bounded by an estimate of the memory it holds, not by its entry count.

Entry counts do not bound memory when entries vary in size: a cache of 8,192 tokenised question
blocks is a few MB for normal questions and gigabytes for a client that sends megabyte-sized ones.
Each entry is charged its estimated size, the oldest entries go when the budget is exceeded, and an
entry larger than a fixed share of the budget is not kept at all (it would only evict everything else).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable


class SizedLRU[K: Hashable, V]:
    """Thread-safe: the prompt compiler runs on the event loop and, for large requests, in worker threads."""

    def __init__(self, *, max_bytes: int, cost: Callable[[K, V], int], max_entry_share: float = 0.01) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._cost = cost
        self._max_entry = int(max_bytes * max_entry_share)
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: K) -> V | None:
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return None
            self._items.move_to_end(key)
            return found[0]

    def put(self, key: K, value: V) -> None:
        size = self._cost(key, value)
        if size > self._max_entry:
            return
        with self._lock:
            previous = self._items.pop(key, None)
            if previous is not None:
                self.bytes -= previous[1]
            self._items[key] = (value, size)
            self.bytes += size
            while self.bytes > self.max_bytes and self._items:
                _, (_, evicted) = self._items.popitem(last=False)
                self.bytes -= evicted


def ids_cost(ids_count: int) -> int:
    """Bytes a tuple of `ids_count` token ids costs in CPython: an 8-byte slot and a 32-byte int each."""
    return 56 + 40 * ids_count

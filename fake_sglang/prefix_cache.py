"""The fake's prefix cache: a token radix tree like SGLang's RadixCache, so `cached_tokens` tells the
truth about which prompts were seen before."""

from __future__ import annotations

from collections.abc import Sequence


class _Node:
    __slots__ = ("children", "key")

    def __init__(self, key: list[int]) -> None:
        self.key = key
        self.children: dict[int, _Node] = {}


def _common_len(key: list[int], ids: Sequence[int], start: int) -> int:
    limit = min(len(key), len(ids) - start)
    for i in range(limit):
        if key[i] != ids[start + i]:
            return i
    return limit


class PrefixCache:
    """A token radix tree like SGLang's RadixCache (page size 1), bounded in stored tokens.

    Eviction is coarse on purpose (the whole tree is dropped when full): tests need truthful hits,
    not SGLang's LRU policy, and benchmarks need it cheap.
    """

    def __init__(self, capacity_tokens: int = 2_000_000) -> None:
        self.capacity_tokens = capacity_tokens
        self.clear()

    def clear(self) -> None:
        self._root = _Node([])
        self.size = 0

    def match(self, ids: Sequence[int]) -> int:
        """Length of the longest prefix of ``ids`` already in the tree."""
        node, pos, n = self._root, 0, len(ids)
        while pos < n:
            child = node.children.get(ids[pos])
            if child is None:
                break
            k = len(child.key)
            if ids[pos : pos + k] != child.key:
                return pos + _common_len(child.key, ids, pos)
            node, pos = child, pos + k
        return pos

    def insert(self, ids: Sequence[int]) -> None:
        """Add a computed prompt; shared prefixes are stored once."""
        if self.size + len(ids) > self.capacity_tokens:
            self.clear()
        node, pos, n = self._root, 0, len(ids)
        while pos < n:
            child = node.children.get(ids[pos])
            if child is None:
                node.children[ids[pos]] = _Node(list(ids[pos:]))
                self.size += n - pos
                return
            k = len(child.key)
            if ids[pos : pos + k] == child.key:
                node, pos = child, pos + k
                continue
            common = _common_len(child.key, ids, pos)
            if common == n - pos:
                return  # the prompt ends inside this edge: already covered
            self._split(node, child, common)
            rest = list(ids[pos + common :])
            node.children[ids[pos]].children[rest[0]] = _Node(rest)
            self.size += len(rest)
            return

    @staticmethod
    def _split(parent: _Node, child: _Node, at: int) -> None:
        middle = _Node(child.key[:at])
        child.key = child.key[at:]
        middle.children[child.key[0]] = child
        parent.children[middle.key[0]] = middle

"""Content-free priors for debiasing (contextual calibration), measured once per question and kept.

A small model prefers some label positions whatever the text says (the bundled 0.5B picked option 1
for almost every item). Asking the same question of a content-free state ("N/A") measures that
preference, and dividing it out of the real answer removes it (Zhao et al. 2021, "Calibrate Before
Use"). The prior depends only on the question's suffix (its text, options and order, and the images of
its instructions, which go with its prior too), which callers
repeat across requests, so each distinct suffix is scored once and cached: the first request pays
one extra branch per new question, later ones none.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from inference.backends.base import Prefix
from inference.lru import SizedLRU, ids_cost
from inference.prompts import Branch, PriorKey

PRIOR_CACHE_BYTES = 16 << 20


class Priors:
    """The priors of one served model: its content-free prefix and the cache of measured suffixes."""

    def __init__(self, *, prefix_ids: tuple[int, ...], max_bytes: int = PRIOR_CACHE_BYTES) -> None:
        self.prefix = Prefix(ids=prefix_ids)
        """Shared by every prior measured, so what a backend derives from it is derived once per process."""
        self._cache: SizedLRU[PriorKey, tuple[float, ...]] = SizedLRU(max_bytes=max_bytes, cost=_cost)

    def lookup(self, *, branches: Iterable[Branch]) -> tuple[dict[PriorKey, tuple[float, ...]], list[Branch]]:
        """(the priors already known, keyed by suffix (and its images: `Branch.prior_key`); one branch per distinct
        key still to measure)."""
        known: dict[PriorKey, tuple[float, ...]] = {}
        missing: dict[PriorKey, Branch] = {}
        for branch in branches:
            key = branch.prior_key
            if key in known or key in missing:
                continue
            prior = self._cache.get(key)
            if prior is None:
                missing[key] = branch
            else:
                known[key] = prior
        return known, list(missing.values())

    def remember(self, *, branch: Branch, label_logprobs: Sequence[float]) -> None:
        self._cache.put(branch.prior_key, tuple(label_logprobs))


def _cost(key: PriorKey, prior: tuple[float, ...]) -> int:
    """A suffix's ids and its prior; the digests of a suffix's images (64 hex characters each) besides."""
    return ids_cost(len(key)) + ids_cost(len(prior)) + sum(113 for part in key if isinstance(part, str))

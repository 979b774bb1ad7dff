"""The fake model's log-probs: a pure function of the prompt ids and the token id, so tests can predict
every answer without a model (blake2b, never `hash()`: the same on every machine and process)."""

from __future__ import annotations

import hashlib
import sys
from array import array
from collections.abc import Callable, Sequence
from typing import Any

LOGPROB_MIN = -12.0
LOGPROB_MAX = -0.05
CLAMPED_LOGPROB = -9999.0

LogprobFn = Callable[[Sequence[int], int], float]


def _ids_bytes(ids: Sequence[int]) -> bytes:
    """Fixed-width little-endian bytes, so the hash is identical on every machine and process."""
    packed = array("q", ids)
    if sys.byteorder == "big":  # pragma: no cover - no big-endian CI
        packed.byteswap()
    return packed.tobytes()


def prompt_hasher(ids: Sequence[int]) -> Any:
    """Hash state of the prompt alone; copied per token so a request hashes its prompt once."""
    hasher = hashlib.blake2b(digest_size=8, person=b"fake-sglang")
    hasher.update(_ids_bytes(ids))
    return hasher


def logprob_from(prompt_hasher: Any, token_id: int) -> float:
    hasher = prompt_hasher.copy()
    hasher.update(token_id.to_bytes(8, "little", signed=True))
    unit = int.from_bytes(hasher.digest(), "little") / 2**64
    return LOGPROB_MIN + unit * (LOGPROB_MAX - LOGPROB_MIN)


def fake_logprob(ids: Sequence[int], token_id: int) -> float:
    """The fake model's log-prob of ``token_id`` right after the prompt ``ids``, in [-12, -0.05].

    Pure and process-independent (blake2b, never ``hash()``), so tests can predict the answer of any
    request: the server returns exactly these floats (unless a per-server override is set).
    """
    return logprob_from(prompt_hasher(ids), token_id)


def fake_token_text(token_id: int) -> str:
    """Text the fake reports for a token; it has no tokenizer, so the id is spelled out."""
    return f"<tok{token_id}>"


class Scorer:
    """Log-probs of one prompt, honouring the server's per-test overrides."""

    __slots__ = ("_clamped", "_fn", "_hasher", "_ids")

    def __init__(self, ids: Sequence[int], fn: LogprobFn | None, clamped: frozenset[int]) -> None:
        self._ids = ids
        self._fn = fn
        self._clamped = clamped
        self._hasher = prompt_hasher(ids)

    def __call__(self, token_id: int) -> float:
        if token_id in self._clamped:
            return CLAMPED_LOGPROB
        if self._fn is not None:
            return float(self._fn(self._ids, token_id))
        return logprob_from(self._hasher, token_id)

    def seed(self) -> int:
        """A per-prompt seed, for orders that must look arbitrary yet repeat exactly."""
        return int.from_bytes(self._hasher.digest(), "little")

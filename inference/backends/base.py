"""The backend protocol: the only thing the runner knows about a model server.

A backend prefills the shared prefix once (`warm`), then scores branches that continue it, reading
the log-probs of each branch's label tokens at the first output position.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from inference.tokenizer import Tokenizer

BranchMode = Literal["batched", "parallel"]
"""How a backend sends an evaluation's branches: one batched request, or one request each. Here, not in
the SGLang client, so that settings name it without loading an HTTP stack."""


@dataclass(frozen=True)
class Prefix:
    """The start of a prompt that the warm-up and every branch share: its ids and the images that its
    placeholders stand for, in order.

    One object per evaluation (and one per served model for the content-free priors), handed to every
    call, so the text a backend writes for it is derived here, once: a 64-branch batch repeats the same
    few hundred ids 64 times, and encoding them for every branch was the largest CPU cost of a batched
    evaluation. The llama.cpp backend never asks, and never pays.
    """

    ids: tuple[int, ...]
    image_data: tuple[str, ...] = ()

    @functools.cached_property
    def ids_text(self) -> str:
        """The ids as the items of a JSON list (decimals joined by commas, no brackets)."""
        return ",".join(map(str, self.ids))

    @functools.cached_property
    def images_json(self) -> str | None:
        """The images as a compact JSON list (often megabytes of `data:` URLs); None without images."""
        return json.dumps(list(self.image_data), separators=(",", ":")) if self.image_data else None


@dataclass(frozen=True)
class SuffixImages:
    """The images a branch's suffix holds after its prefix's: a question's own (its instructions'), in placeholder
    order. One object per question, shared by its branches and its prior, so the text a backend writes for them
    (often megabytes of `data:` URLs) is derived once, as `Prefix` does for the prefix's."""

    urls: tuple[str, ...]
    keys: tuple[str, ...]
    """What tells the images apart without their bytes (each one's SHA-256): part of a prior's cache key."""

    @functools.cached_property
    def json_items(self) -> str:
        """The URLs as the items of a compact JSON list (no brackets)."""
        return json.dumps(list(self.urls), separators=(",", ":"))[1:-1]


@dataclass(frozen=True)
class BranchCall:
    """One generation of one output token for the prompt `prefix + suffix`.

    The two halves stay apart because every branch shares the same `Prefix` object, and with it what a
    backend derives from it. `images`: the suffix's own images (a question's), which follow the prefix's
    in the call's image list; None for a text-only suffix (every branch of a text-only question).
    """

    rid: str
    prefix: Prefix
    suffix: Sequence[int]
    label_ids: Sequence[int]
    images: SuffixImages | None = None

    @property
    def image_data(self) -> tuple[str, ...]:
        """Every image of the call's prompt, in placeholder order: the prefix's, then the suffix's."""
        return self.prefix.image_data + (self.images.urls if self.images else ())

    @property
    def ids(self) -> list[int]:
        return [*self.prefix.ids, *self.suffix]


@dataclass(frozen=True)
class Generation:
    """What a backend reports for one generation.

    `label_logprobs` follows the order of the call's `label_ids` (empty for the warm-up).
    `cached_tokens` is None when the backend does not say: it must never be guessed.
    """

    prompt_tokens: int
    cached_tokens: int | None
    label_logprobs: tuple[float, ...] = ()


BranchScored = Callable[[int, Generation], None]
"""Called on the event loop with a call's index and its generation as soon as that branch is scored
(before `score` returns), so answers can be streamed; it must not block."""


class Backend(Protocol):
    kind: str
    """'sglang' or 'local'; stored with each evaluation."""
    model: str
    """The served model id, as the backend names it."""

    @property
    def context_tokens(self) -> int | None:
        """The longest prompt the backend accepts, when it is known here (the llama.cpp
        backend's context); the per-question budget is clamped to it, so an over-long prompt is a 422."""
        ...

    async def warm(self, *, rid: str, prefix: Prefix) -> Generation:
        """Prefill exactly the prefix (with its images) with one output token, so later branches hit the cache."""
        ...

    async def score(self, *, calls: Sequence[BranchCall], scored: BranchScored | None = None) -> list[Generation]:
        """Score every branch; results in call order, each also reported to `scored` as it finishes."""
        ...

    async def abort(self, *, rids: Sequence[str]) -> None:
        """Ask the backend to drop these requests; never raises."""
        ...

    async def health(self) -> bool:
        """True when the backend answers its health check."""
        ...

    def tokenizer(self) -> Tokenizer:
        """The tokenizer of the served model."""
        ...

"""The backend protocol: the only thing the runner knows about a model server.

A backend prefills the shared prefix once (`warm`), then scores branches that continue it, reading
the log-probs of each branch's label tokens at the first output position.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from inference.tokenizer import Tokenizer

BranchMode = Literal["batched", "parallel"]
"""How a backend sends an evaluation's branches: one batched request, or one request each. Here, not in
the SGLang client, so that settings name it without loading an HTTP stack."""


@dataclass(frozen=True)
class BranchCall:
    """One generation of one output token for the prompt `prefix + suffix`.

    The two halves stay apart because every branch shares the same prefix object: a backend can
    serialise it once per evaluation instead of once per branch.
    """

    rid: str
    prefix: Sequence[int]
    suffix: Sequence[int]
    label_ids: Sequence[int]
    image_data: Sequence[str] = ()
    """The images the prompt's placeholders stand for, in order (the same object for every branch)."""

    @property
    def ids(self) -> list[int]:
        return [*self.prefix, *self.suffix]


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

    async def warm(self, *, rid: str, prefix_ids: Sequence[int], image_data: Sequence[str] = ()) -> Generation:
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

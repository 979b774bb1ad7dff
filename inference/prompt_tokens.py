"""The tokens of a prompt's parts, cached per tokenizer: callers ask the same questions about ever new states,
so question blocks and the ending repeat across requests and are rendered and tokenized once. A block alone
over the per-question limit is refused from a bounded part of it (`inference.token_bound`).
"""

from __future__ import annotations

import weakref
from typing import Any

from inference.errors import Problem, RequestInvalid
from inference.labels import Labels
from inference.lru import SizedLRU, ids_cost
from inference.prompt_text import question_text
from inference.questions import Identity, Question
from inference.token_bound import OverBudget, tokens_within
from inference.tokenizer import Tokenizer

TOKEN_CACHE_BYTES = 64 << 20
"""Per tokenizer; question blocks over 1 % of it (about 16,000 tokens) are tokenised every time."""

Block = tuple[Identity, tuple[int, ...] | None, str]
"""A question block's key: the question's identity, the option order, the labels' texts (one string:
there are hundreds of labels, and a tuple of them would be hashed again at every look-up)."""

TokenCache = SizedLRU[str | Block, tuple[int, ...]]
"""Token ids by text (the ending) or by question block."""

_caches: weakref.WeakKeyDictionary[Any, TokenCache] = weakref.WeakKeyDictionary()


def token_cache_get(*, tokenizer: Tokenizer) -> TokenCache:
    """A per-tokenizer LRU bounded by bytes: callers ask the same questions about ever new states, so
    question blocks and the ending repeat across requests and need rendering and tokenizing once."""
    cache = _caches.get(tokenizer)
    if cache is None:
        cache = _caches[tokenizer] = SizedLRU(max_bytes=TOKEN_CACHE_BYTES, cost=_cost)
    return cache


def _cost(key: str | Block, ids: tuple[int, ...]) -> int:
    if isinstance(key, str):
        return 49 + len(key) * 4 + ids_cost(len(ids))
    (_, instructions, options, *layout), _, _ = key
    characters = len(instructions or "") + sum(len(k) + len(t) for k, t in options)
    if layout:  # instructions with images: their texts again, and each image's digest
        characters += sum(len(part) if isinstance(part, str) else 64 for part in layout[0])
    return 300 + 100 * len(options) + characters * 4 + ids_cost(len(ids))


def text_tokenize(*, cache: TokenCache, tokenizer: Tokenizer, text: str) -> tuple[int, ...]:
    """The tokens of `text`, tokenized once while the cache holds them."""
    ids = cache.get(text)
    if ids is None:
        ids = tuple(tokenizer.encode(text))
        cache.put(text, ids)
    return ids


def block_tokenize(
    *,
    cache: TokenCache,
    tokenizer: Tokenizer,
    question: Question,
    labels: Labels,
    order: tuple[int, ...] | None,
    max_input_tokens: int,
) -> tuple[int, ...]:
    """The tokens of a question block, cached by the question's identity (not its text: building the
    text of 64 blocks per request, only to look their tokens up, was a tenth of the compile's CPU); a block alone
    over the per-question budget is refused from a bounded part of it (`inference.token_bound`)."""
    key = (question.identity, order, labels.texts)
    ids = cache.get(key)
    if ids is None:
        text = question_text(question=question, labels=labels.items, order=order)
        found = tokens_within(tokenizer=tokenizer, text=text, limit=max_input_tokens)
        if isinstance(found, OverBudget):
            raise over_budget_refusal(
                loc=("questions", question.id), what="this question", over=found, max_input_tokens=max_input_tokens
            )
        ids = found
        cache.put(key, ids)
    return ids


def over_budget_refusal(*, loc: tuple[str, ...], what: str, over: OverBudget, max_input_tokens: int) -> RequestInvalid:
    """The refusal of a part (the state, a question) whose first characters alone are over the per-question limit."""
    return RequestInvalid(
        [
            Problem(
                loc,
                f"{what} is over the limit of {max_input_tokens} tokens per question: its first "
                f"{over.characters} characters alone are {over.tokens} tokens or more",
                "token_limit",
            )
        ]
    )

"""The answer-label alphabet: A..Z, then AA, AB, ... kept only where the tokenizer agrees.

A label is usable only if it is exactly one token, decodes back to itself and differs from every
other label, because the answer is read from one position's log-probs. Token ids are never
hard-coded: they come from the tokenizer that is actually served.
"""

from __future__ import annotations

import string
from collections.abc import Iterator
from dataclasses import dataclass

from inference.errors import StartupError
from inference.tokenizer import Tokenizer


@dataclass(frozen=True)
class Label:
    text: str
    token_id: int


def _candidates() -> Iterator[str]:
    letters = string.ascii_uppercase
    yield from letters
    for first in letters:
        for second in letters:
            yield first + second


def labels_build(*, tokenizer: Tokenizer, count: int) -> tuple[Label, ...]:
    """The first `count` usable labels; fails startup when the tokenizer has too few."""
    labels: list[Label] = []
    seen: set[int] = set()
    for text in _candidates():
        ids = tokenizer.encode(text)
        if len(ids) != 1 or ids[0] in seen or tokenizer.decode(ids) != text:
            continue
        seen.add(ids[0])
        labels.append(Label(text=text, token_id=ids[0]))
        if len(labels) == count:
            return tuple(labels)
    raise StartupError(f"the tokenizer has only {len(labels)} single-token labels; "
                       f"OPENJEV_MAX_ANSWERS={count} needs that many")

"""The answer-label alphabet: A..Z, then AA, AB, ... kept only where the tokenizer agrees.

A label is read from one position's log-probs, so each must be exactly one token, decode back to
itself and differ from every other label. It must also be the token the model would really produce
there: the ids we read are checked against how the tokenizer splits the natural text "prompt ending,
answer cue, label". A prompt that ends in a lone space token, for example, makes the model continue
with space-led tokens (`ĠA`), and reading the bare `A` then measures leftovers (issue 10: the label
mass was about 1 %). Token ids are never hard-coded: they come from the tokenizer actually served.
"""

from __future__ import annotations

import functools
import string
from collections.abc import Iterator
from dataclasses import dataclass

from inference.errors import StartupError
from inference.tokenizer import Tokenizer

ANSWER_CUE = ""
"""Text between the chat template's assistant header and the label. Empty: the reply starts with the
label, which every Qwen tokenizer we serve splits as a token of its own (bench/quality.py chose it)."""
LABEL_LEAD = ""
"""What precedes the letters in the token that is read (a space after a cue like `Answer:`)."""


@dataclass(frozen=True)
class Label:
    text: str
    """What the model reads in front of an option (`A`)."""
    token_id: int
    """The id of the token read for it: `LABEL_LEAD + text` as the model continues the prompt."""


@dataclass(frozen=True)
class Labels:
    """An evaluator's label alphabet, in order, and what every compile derives from it, kept on it: the
    alphabet is built once per process and read by every request."""

    items: tuple[Label, ...]

    @functools.cached_property
    def texts(self) -> str:
        """The labels' texts as one string: a part of every cached question block's key
        (`inference.prompt_tokens`), joined once rather than at every compile."""
        return "\n".join(label.text for label in self.items)


def _candidates() -> Iterator[str]:
    letters = string.ascii_uppercase
    yield from letters
    for first in letters:
        for second in letters:
            yield first + second


def labels_build(*, tokenizer: Tokenizer, count: int, ending: str) -> Labels:
    """The first `count` usable labels after the prompt `ending`; fails startup when there are too few.

    `ending` is the chat template's text after the question (end of turn, assistant header, empty
    think block): the label is validated as the continuation of `ending + ANSWER_CUE`.
    """
    context = ending + ANSWER_CUE
    context_ids = tokenizer.encode(context)
    labels: list[Label] = []
    seen: set[int] = set()
    for text in _candidates():
        ids = tokenizer.encode(LABEL_LEAD + text)
        if len(ids) != 1 or ids[0] in seen or tokenizer.decode(ids) != LABEL_LEAD + text:
            continue
        if tokenizer.encode(context + LABEL_LEAD + text) != [*context_ids, ids[0]]:
            continue  # the model would not produce this token here: its probability means nothing
        seen.add(ids[0])
        labels.append(Label(text=text, token_id=ids[0]))
        if len(labels) == count:
            return Labels(items=tuple(labels))
    raise StartupError(
        f"the tokenizer has only {len(labels)} single-token labels that continue the prompt "
        f"naturally; the configured maximum number of answers needs {count}"
    )

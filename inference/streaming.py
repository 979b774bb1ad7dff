"""Answers as soon as their branches are scored, for clients that read them one by one.

An HTTP answer waits for every branch; a streaming client (the WebSocket stream) wants each
question's answer the moment the last generation it depends on is in. The backends report each
generation as it finishes (`Backend.score`'s `scored` callback); `AnswerStream` counts down, per
question, the generations it needs and emits that question's answer when the count reaches zero.

What a question needs:
- every one of its branches (one per option order: with permutation averaging, all orders);
- when its shape is debiased, the content-free prior of each of those branches' suffixes: from the prior
  cache when the suffix was seen before, otherwise the prior generation the runner appended at the
  end of the batch, so on first sight a question is answered only when that prior is in.

How soon that is depends on the backend: the embedded engine scores branches one by one, SGLang's
parallel mode sends one request per branch, and SGLang's batched mode gets every branch back in one
response, so there all answers arrive together.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from inference.backends.base import Generation
from inference.prompts import Branch, Plan, PriorKey
from inference.scoring import Answer, BranchScore, Scoring, answer_compute

AnswerSink = Callable[[Answer], None]
"""Receives each answer on the event loop; must not block (it queues the answer for sending)."""
PriorLogprobs = Mapping[PriorKey, tuple[float, ...]]
"""Content-free prior log-probs by branch suffix (and its images: `Branch.prior_key`)."""


def branch_score_build(
    *, branch: Branch, generation: Generation, priors: PriorLogprobs | None, scoring: Scoring
) -> BranchScore:
    """What `answer_compute` reads of one scored branch (and its prior, when its question's shape is
    debiased: the runner measured priors for those branches only)."""
    prior = priors[branch.prior_key] if priors is not None and scoring.of(branch.question).debias else None
    return BranchScore(order=branch.order, label_logprobs=generation.label_logprobs, prior_logprobs=prior)


class AnswerStream:
    """Counts down each question's outstanding generations; emits its answer when none is left.

    Call indices are the runner's: the plan's branches first, then one prior generation per
    suffix in `prior_branches`. After `close()` (the evaluation ended, failed or was cancelled), a
    late report (a branch that was already inside llama.cpp) is ignored, so nothing is emitted for
    an evaluation the client was already told is over.
    """

    def __init__(
        self,
        *,
        plan: Plan,
        prior_branches: Sequence[Branch],
        priors: PriorLogprobs | None,
        scoring: Scoring,
        sink: AnswerSink,
    ) -> None:
        self._plan = plan
        self._priors = None if priors is None else dict(priors)
        self._scoring = scoring
        self._sink = sink
        self._closed = False
        self._generations: dict[int, Generation] = {}
        prior_index = {b.prior_key: len(plan.branches) + i for i, b in enumerate(prior_branches)}
        self._prior_suffix = {index: suffix for suffix, index in prior_index.items()}
        self._branches: dict[str, list[int]] = {}
        self._outstanding: dict[str, set[int]] = {}
        self._waiters: dict[int, list[str]] = {}
        for index, branch in enumerate(plan.branches):
            qid = branch.question.id
            self._branches.setdefault(qid, []).append(index)
            needed = self._outstanding.setdefault(qid, set())
            needed.add(index)
            key = branch.prior_key
            if key in prior_index:
                needed.add(prior_index[key])
        for qid, needed in self._outstanding.items():
            for index in needed:
                self._waiters.setdefault(index, []).append(qid)

    def scored(self, index: int, generation: Generation) -> None:
        """The backend's report of call `index`; emits every answer that was waiting only for it."""
        if self._closed:
            return
        self._generations[index] = generation
        suffix = self._prior_suffix.get(index)
        if suffix is not None and self._priors is not None:
            self._priors[suffix] = generation.label_logprobs
        for qid in self._waiters.get(index, ()):
            needed = self._outstanding[qid]
            needed.discard(index)
            if not needed:
                self._sink(self._answer(qid))

    def close(self) -> None:
        self._closed = True

    def _answer(self, qid: str) -> Answer:
        indices = self._branches[qid]
        branches = [self._plan.branches[i] for i in indices]
        scores = [
            branch_score_build(branch=b, generation=self._generations[i], priors=self._priors, scoring=self._scoring)
            for b, i in zip(branches, indices, strict=True)
        ]
        question = branches[0].question
        return answer_compute(
            question=question,
            branches=scores,
            temperature=self._scoring.of(question).temperature,
            confidence=self._scoring.confidence,
        )

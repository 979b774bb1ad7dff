"""The embedded llama.cpp engine on the real bundled 0.5B model: prefix reuse, correctness, cancellation.

These tests assemble the bundled GGUF once (into the user cache, reused across runs) and load it
once per module; prompts stay short because the reference machine has two cores.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys
import threading
import types
from collections.abc import Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from inference import gguf
from inference.backends.base import BranchCall, Generation
from inference.backends.llamacpp import LlamaCppBackend, llamacpp_backend_create
from inference.errors import BackendFailed, StartupError
from inference.gguf import BundledModel, gguf_resolve
from inference.labels import Label, labels_build
from inference.prompts import Budget, Plan, plan_compile, prompt_ending
from inference.questions import Question, question_build, text_render
from inference.requests import conversation_of_text
from inference.scoring import Answer, BranchScore, answer_compute

pytestmark = pytest.mark.embedded

BUDGET = Budget(max_input_tokens=8192, max_total_input_tokens=262144)
TOLERANCE = 1e-3
# Batch-shape rounding noise of llama.cpp's quantised CPU kernels (measured up to ~0.15 nats on this model).
ONE_SHOT_LOGPROB_TOLERANCE = 0.3
ONE_SHOT_PROBABILITY_TOLERANCE = 0.05
# One thread: llama.cpp's worker threads spin at barriers, so on a busy two-core machine (tests run in
# parallel with other suites) two threads can be several times slower than one.
THREADS = 1


def _cache_dir() -> Path:
    """The user cache, so the 490 MB assembly happens once per machine, not once per test run."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "openjev" / "models"


def _run[T](coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaCppBackend]:
    backend = llamacpp_backend_create(source="qwen2.5-coder-0.5b", cache_dir=_cache_dir(), n_ctx=4096, threads=THREADS)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def recompute(llama: LlamaCppBackend) -> Iterator[LlamaCppBackend]:
    """The same model with prefix reuse off: every generation evaluated from scratch."""
    path = gguf_resolve(source="qwen2.5-coder-0.5b", cache_dir=_cache_dir())
    backend = LlamaCppBackend(model_path=path, n_ctx=4096, threads=THREADS, prefix_reuse=False)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def labels(llama: LlamaCppBackend) -> tuple[Label, ...]:
    return labels_build(tokenizer=llama.tokenizer(), count=255, ending=prompt_ending(tokenizer=llama.tokenizer()))


def _answer(question: Question, generation: Generation) -> Answer:
    branch = BranchScore(order=tuple(range(len(question.options))), label_logprobs=generation.label_logprobs)
    return answer_compute(question=question, branches=[branch], temperature=1.0, confidence="entropy")


def _plan(llama: LlamaCppBackend, labels: Sequence[Label], state: Any, questions: Sequence[Question]) -> Plan:
    """A text or structured state, as the API gives it to the core: one user message."""
    return plan_compile(conversation=conversation_of_text(text=text_render(state)), questions=questions,
                        tokenizer=llama.tokenizer(), labels=labels, budget=BUDGET)


def _calls(plan: Plan, tag: str) -> list[BranchCall]:
    return [BranchCall(rid=f"{tag}-{i}", prefix=plan.prefix_ids, suffix=b.suffix_ids, label_ids=b.label_ids)
            for i, b in enumerate(plan.branches)]


async def _evaluate(llama: LlamaCppBackend, plan: Plan, tag: str) -> tuple[Generation, list[Generation]]:
    warm = await llama.warm(rid=f"{tag}-warm", prefix_ids=plan.prefix_ids)
    return warm, await llama.score(calls=_calls(plan, tag))


def _close(a: Sequence[Generation], b: Sequence[Generation]) -> bool:
    return all(len(x.label_logprobs) == len(y.label_logprobs)
               and all(abs(p - q) <= TOLERANCE for p, q in zip(x.label_logprobs, y.label_logprobs, strict=True))
               for x, y in zip(a, b, strict=True))


def _noul(instructions: str, id: str = "q") -> Question:
    return question_build(id=id, type="noul", instructions=instructions, criteria=None)


REVIEW = {"review": "Absolutely love it, works perfectly, five stars.", "product": "kettle"}
QUESTIONS = (
    _noul("Is the review positive?", "positive"),
    question_build(id="topic", type="choice", instructions="What is the product?",
                   criteria={"kettle": "A kettle", "car": "A car", "book": "A book"}),
    question_build(id="stars", type="score", instructions="How satisfied is the reviewer?",
                   criteria=["Unhappy", "Neutral", "Delighted"]),
)


# -- tokenizer and template --------------------------------------------------------------------------


def test_labels_are_single_tokens(llama: LlamaCppBackend, labels: tuple[Label, ...]) -> None:
    assert [label.text for label in labels[:26]] == list("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    assert len(labels) == 255
    assert all(len(label.text) == 2 for label in labels[26:])
    tokenizer = llama.tokenizer()
    for label in labels:
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


def test_warm_then_score_reuses_the_prefix(llama: LlamaCppBackend, labels: tuple[Label, ...]) -> None:
    plan = _plan(llama, labels, REVIEW, QUESTIONS)
    prefix = len(plan.prefix_ids)
    _run(llama.warm(rid="other", prefix_ids=_plan(llama, labels, "Another state.", QUESTIONS).prefix_ids))
    warm, branches = _run(_evaluate(llama, plan, "reuse"))
    assert (warm.prompt_tokens, warm.cached_tokens, warm.label_logprobs) == (prefix, 0, ())
    for branch, generation in zip(plan.branches, branches, strict=True):
        assert generation.prompt_tokens == len(plan.branch_ids(branch))
        assert generation.cached_tokens == prefix
    assert [len(g.label_logprobs) for g in branches] == [2, 3, 3]
    again, _ = _run(_evaluate(llama, plan, "again"))
    assert again.cached_tokens == prefix  # the same state twice: the warm-up itself is a cache hit


def test_reuse_matches_recomputing_every_branch(llama: LlamaCppBackend, recompute: LlamaCppBackend,
                                                labels: tuple[Label, ...]) -> None:
    plan = _plan(llama, labels, REVIEW, QUESTIONS)
    _, reused = _run(_evaluate(llama, plan, "cmp"))
    warm, fresh = _run(_evaluate(recompute, plan, "cmp"))
    assert warm.cached_tokens == 0
    assert all(g.cached_tokens == 0 for g in fresh)
    assert _close(reused, fresh)
    assert all(lp < 0 for g in reused for lp in g.label_logprobs)


def test_answers_do_not_depend_on_question_order(llama: LlamaCppBackend, labels: tuple[Label, ...]) -> None:
    forward = _plan(llama, labels, REVIEW, QUESTIONS)
    backward = _plan(llama, labels, REVIEW, QUESTIONS[::-1])
    _, a = _run(_evaluate(llama, forward, "fwd"))
    _, b = _run(_evaluate(llama, backward, "bwd"))
    assert _close(a, b[::-1])


def test_split_evaluation_agrees_with_one_shot(llama: LlamaCppBackend, recompute: LlamaCppBackend,
                                               labels: tuple[Label, ...]) -> None:
    """A branch with no warm-up is evaluated in one piece; it must tell the same story.

    Only roughly: llama.cpp's quantised CPU kernels round differently for different batch shapes.
    """
    plan = _plan(llama, labels, {**REVIEW, "note": "never warmed"}, QUESTIONS)
    _, split = _run(_evaluate(llama, plan, "split"))
    one_shot = _run(recompute.score(calls=_calls(plan, "one-shot")))
    for question, a, b in zip(QUESTIONS, split, one_shot, strict=True):
        assert b.cached_tokens == 0
        assert all(abs(x - y) <= ONE_SHOT_LOGPROB_TOLERANCE
                   for x, y in zip(a.label_logprobs, b.label_logprobs, strict=True))
        p, q = _answer(question, a), _answer(question, b)
        assert all(abs(x - y) <= ONE_SHOT_PROBABILITY_TOLERANCE
                   for x, y in zip(p.probabilities, q.probabilities, strict=True))


# -- answers -----------------------------------------------------------------------------------------


POSITIVE_REVIEW = "Absolutely love it, works perfectly, five stars. Would buy again!"
NEGATIVE_REVIEW = "Broke after two days, support ignored me. Terrible, avoid it."


def _p_true(llama: LlamaCppBackend, labels: tuple[Label, ...], review: str) -> float:
    question = _noul("Is this review positive?")
    plan = _plan(llama, labels, f"Review: {review}", [question])
    _, (generation,) = _run(_evaluate(llama, plan, "yes-no"))
    return _answer(question, generation).probabilities[0]


def test_yes_no_orders_positive_above_negative(llama: LlamaCppBackend, labels: tuple[Label, ...]) -> None:
    assert _p_true(llama, labels, POSITIVE_REVIEW) > _p_true(llama, labels, NEGATIVE_REVIEW)


@pytest.mark.parametrize(("review", "positive"), [(POSITIVE_REVIEW, True), (NEGATIVE_REVIEW, False)])
def test_yes_no_lands_on_the_right_side(llama: LlamaCppBackend, labels: tuple[Label, ...], review: str,
                                        positive: bool) -> None:
    """Depends on the prompt wording: the 0.5B model leans towards label A, and the margin is thin.

    With the current prompts P(true) is about 0.61 and 0.49; with no answer cue both land near 0.7.
    """
    assert (_p_true(llama, labels, review) > 0.5) is positive


# -- concurrency and cancellation --------------------------------------------------------------------


def test_interleaved_evaluations_match_sequential(llama: LlamaCppBackend, labels: tuple[Label, ...]) -> None:
    first = _plan(llama, labels, REVIEW, QUESTIONS[:2])
    second = _plan(llama, labels, "The meeting moved to Tuesday at 3 pm.", [_noul("Is a time mentioned?")])

    async def both() -> list[tuple[Generation, list[Generation]]]:
        return list(await asyncio.gather(_evaluate(llama, first, "one"), _evaluate(llama, second, "two")))

    sequential = [_run(_evaluate(llama, first, "one")), _run(_evaluate(llama, second, "two"))]
    together = _run(both())
    for (_, alone), (_, mixed) in zip(sequential, together, strict=True):
        assert _close(alone, mixed)


def _five_branches(llama: LlamaCppBackend, labels: tuple[Label, ...]) -> Plan:
    return _plan(llama, labels, "Short state.", [_noul(f"Question number {i}?", str(i)) for i in range(5)])


def test_abort_skips_remaining_branches(llama: LlamaCppBackend, labels: tuple[Label, ...],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _five_branches(llama, labels)
    calls = _calls(plan, "abort")
    done: list[int] = []
    original = llama._generate

    async def main() -> None:
        loop = asyncio.get_running_loop()

        def generate(prefix: Sequence[int], suffix: Sequence[int], label_ids: Sequence[int],
                     flag: threading.Event) -> Generation:
            result = original(prefix, suffix, label_ids, flag)
            done.append(len(suffix))
            if len(done) == 1:  # abort from the loop, and wait until it has been applied
                asyncio.run_coroutine_threadsafe(llama.abort(rids=[c.rid for c in calls]), loop).result(5)
            return result

        monkeypatch.setattr(llama, "_generate", generate)
        with pytest.raises(BackendFailed, match="aborted"):
            await llama.score(calls=calls)

    _run(main())
    assert len(done) == 1
    assert llama._flags == {}


def test_cancelled_call_skips_remaining_branches(llama: LlamaCppBackend, labels: tuple[Label, ...],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _five_branches(llama, labels)
    done: list[int] = []
    finished = threading.Event()
    original = llama._generate

    async def main() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(llama.score(calls=_calls(plan, "cancel")))

        def generate(prefix: Sequence[int], suffix: Sequence[int], label_ids: Sequence[int],
                     flag: threading.Event) -> Generation:
            try:
                result = original(prefix, suffix, label_ids, flag)
            except BaseException:
                finished.set()
                raise
            done.append(len(suffix))
            if len(done) == 1:
                loop.call_soon_threadsafe(task.cancel)
                assert flag.wait(5)  # the cancelled coroutine sets the call's flag
            return result

        monkeypatch.setattr(llama, "_generate", generate)
        with pytest.raises(asyncio.CancelledError):
            await task

    _run(main())
    assert finished.wait(5)  # the worker reached the second branch and refused it
    assert len(done) == 1
    # The engine is still usable afterwards, and its cache bookkeeping is consistent.
    monkeypatch.undo()
    _, generations = _run(_evaluate(llama, plan, "after"))
    assert len(generations) == 5


def test_prompt_over_the_context_fails_clearly(llama: LlamaCppBackend) -> None:
    too_long = [32] * (llama.context_tokens + 1)
    with pytest.raises(BackendFailed, match="context"):
        _run(llama.warm(rid="long", prefix_ids=too_long))


async def _health(llama: LlamaCppBackend) -> bool:
    return await llama.health()


def test_health_and_identity(llama: LlamaCppBackend) -> None:
    assert _run(_health(llama)) is True
    assert llama.kind == "local"
    assert llama.model == "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF:q4_k_m"
    assert llama.load_seconds > 0


# -- model files -------------------------------------------------------------------------------------


def test_missing_custom_file_fails_startup(tmp_path: Path) -> None:
    with pytest.raises(StartupError, match="neither a bundled model"):
        gguf_resolve(source=str(tmp_path / "absent.gguf"), cache_dir=tmp_path)


def test_custom_file_must_be_gguf(tmp_path: Path) -> None:
    not_gguf = tmp_path / "weights.gguf"
    not_gguf.write_bytes(b"<html>not found</html>")
    with pytest.raises(StartupError, match="not a GGUF file"):
        gguf_resolve(source=str(not_gguf), cache_dir=tmp_path)
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + bytes(60))
    assert gguf_resolve(source=str(broken), cache_dir=tmp_path) == broken
    with pytest.raises(StartupError, match="cannot load"):
        LlamaCppBackend(model_path=broken)


def _fake_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunks: Sequence[bytes], sha256: str,
                 modules: int | None = None) -> BundledModel:
    """A tiny bundled model whose part modules are injected into sys.modules (never the real cache)."""
    model = BundledModel(name="tiny-test", repo="test/tiny", served_name="test/tiny", release_date="unknown",
                         file_name="tiny.gguf", sha256=sha256, package="openjev-test-tiny-part{n}", version="1.0",
                         parts=len(chunks))
    for n, chunk in enumerate(chunks[:modules], start=1):
        part = tmp_path / f"part{n}.bin"
        part.write_bytes(chunk)
        module = types.ModuleType(model.part_module(n))
        module.get_part_path = lambda part=part: str(part)  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, model.part_module(n), module)
    monkeypatch.setitem(gguf.BUNDLED, model.name, model)
    return model


def test_bundled_assembly_verifies_and_is_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chunks = [b"GGUF-first-", b"second-", b"third"]
    model = _fake_bundle(tmp_path, monkeypatch, chunks, hashlib.sha256(b"".join(chunks)).hexdigest())
    cache = tmp_path / "cache"
    path = gguf_resolve(source=model.name, cache_dir=cache)
    assert path.read_bytes() == b"".join(chunks)
    assert (cache / "tiny.gguf.sha256").is_file()

    def no_reassembly(**_: Any) -> None:
        raise AssertionError("a verified cache must be reused")

    monkeypatch.setattr(gguf, "_assemble", no_reassembly)
    assert gguf_resolve(source=model.name, cache_dir=cache) == path
    assert sorted(p.name for p in cache.iterdir()) == ["tiny.gguf", "tiny.gguf.sha256"]


def test_changed_cache_file_is_reassembled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chunks = [b"GGUF-a", b"-b"]
    model = _fake_bundle(tmp_path, monkeypatch, chunks, hashlib.sha256(b"".join(chunks)).hexdigest())
    cache = tmp_path / "cache"
    path = gguf_resolve(source=model.name, cache_dir=cache)
    path.write_bytes(b"GGUF-x-b")  # same size, different content: the sidecar no longer vouches for it
    assert gguf_resolve(source=model.name, cache_dir=cache).read_bytes() == b"GGUF-a-b"


def test_hash_mismatch_fails_startup_and_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _fake_bundle(tmp_path, monkeypatch, [b"GGUF-a", b"-b"], "0" * 64)
    cache = tmp_path / "cache"
    with pytest.raises(StartupError, match="sha256"):
        gguf_resolve(source=model.name, cache_dir=cache)
    assert list(cache.iterdir()) == []


def test_missing_part_package_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _fake_bundle(tmp_path, monkeypatch, [b"GGUF-a", b"-b", b"-c"], "0" * 64, modules=1)
    with pytest.raises(StartupError, match=r"openjev-test-tiny-part2==1\.0 openjev-test-tiny-part3==1\.0"):
        gguf_resolve(source=model.name, cache_dir=tmp_path / "cache")

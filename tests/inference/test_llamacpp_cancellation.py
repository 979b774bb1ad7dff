"""The llama.cpp backend under concurrency and cancellation, and at its limits, on the real bundled model."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import pytest

from inference.backends.base import Generation, Prefix
from inference.backends.llamacpp import LlamaCppBackend
from inference.errors import BackendFailed
from inference.labels import Labels
from inference.prompts import Plan
from tests.inference.llamacpp import (
    QUESTIONS,
    REVIEW,
    calls_of,
    evaluate,
    generations_close,
    noul,
    plan_of,
    run,
)

pytestmark = pytest.mark.embedded


def test_interleaved_evaluations_match_sequential(llama: LlamaCppBackend, labels: Labels) -> None:
    first = plan_of(llama, labels, REVIEW, QUESTIONS[:2])
    second = plan_of(llama, labels, "The meeting moved to Tuesday at 3 pm.", [noul("Is a time mentioned?")])

    async def both() -> list[tuple[Generation, list[Generation]]]:
        return list(await asyncio.gather(evaluate(llama, first, "one"), evaluate(llama, second, "two")))

    sequential = [run(evaluate(llama, first, "one")), run(evaluate(llama, second, "two"))]
    together = run(both())
    for (_, alone), (_, mixed) in zip(sequential, together, strict=True):
        assert generations_close(alone, mixed)


def _five_branches(llama: LlamaCppBackend, labels: Labels) -> Plan:
    return plan_of(llama, labels, "Short state.", [noul(f"Question number {i}?", str(i)) for i in range(5)])


def test_abort_skips_remaining_branches(
    llama: LlamaCppBackend, labels: Labels, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = _five_branches(llama, labels)
    calls = calls_of(plan, "abort")
    done: list[int] = []
    original = llama._generate

    async def main() -> None:
        loop = asyncio.get_running_loop()

        def generate(
            prefix: Sequence[int], suffix: Sequence[int], label_ids: Sequence[int], flag: threading.Event
        ) -> Generation:
            result = original(prefix, suffix, label_ids, flag)
            done.append(len(suffix))
            if len(done) == 1:  # abort from the loop, and wait until it has been applied
                asyncio.run_coroutine_threadsafe(llama.abort(rids=[c.rid for c in calls]), loop).result(5)
            return result

        monkeypatch.setattr(llama, "_generate", generate)
        with pytest.raises(BackendFailed, match="aborted"):
            await llama.score(calls=calls)

    run(main())
    assert len(done) == 1
    assert llama._flags == {}


def test_cancelled_call_skips_remaining_branches(
    llama: LlamaCppBackend, labels: Labels, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = _five_branches(llama, labels)
    done: list[int] = []
    finished = threading.Event()
    original = llama._generate

    async def main() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(llama.score(calls=calls_of(plan, "cancel")))

        def generate(
            prefix: Sequence[int], suffix: Sequence[int], label_ids: Sequence[int], flag: threading.Event
        ) -> Generation:
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

    run(main())
    assert finished.wait(5)  # the worker reached the second branch and refused it
    assert len(done) == 1
    # The engine is still usable afterwards, and its cache bookkeeping is consistent.
    monkeypatch.undo()
    _, generations = run(evaluate(llama, plan, "after"))
    assert len(generations) == 5


def test_prompt_over_the_context_fails_clearly(llama: LlamaCppBackend) -> None:
    too_long = (32,) * (llama.context_tokens + 1)
    with pytest.raises(BackendFailed, match="context"):
        run(llama.warm(rid="long", prefix=Prefix(ids=too_long)))


async def _health(llama: LlamaCppBackend) -> bool:
    return await llama.health()


def test_health_and_identity(llama: LlamaCppBackend) -> None:
    assert run(_health(llama)) is True
    assert llama.kind == "local"
    assert llama.model == "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF:q4_k_m"
    assert llama.load_seconds > 0

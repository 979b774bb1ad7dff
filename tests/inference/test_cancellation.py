"""Aborts run off the request path: a backend that hangs on its abort can hold neither the admission
slot nor the deadline, and an abort storm is bounded and deduplicated."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import replace

import pytest

from inference import cancellation
from inference.backends.sglang import SGLangBackend
from inference.cancellation import abort_schedule
from inference.errors import EvaluationTimeout
from inference.questions import question_build
from inference.requests import EvaluationRequest, conversation_of_text
from inference.runner import evaluation_run
from testbed.evaluators import fake_evaluator
from testbed.qwen3 import qwen3_tokenizer

QUESTION = question_build(id="q", type="noul", instructions="Is it urgent?", criteria=None)
REQUEST = EvaluationRequest(conversation=conversation_of_text(text="A ticket."), questions=(QUESTION,))


class AbortHangs(SGLangBackend):
    """A backend whose abort never returns, like an SGLang that hangs on `/abort_request`."""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.asked: list[list[str]] = []

    async def abort(self, *, rids: Sequence[str]) -> None:
        self.asked.append(list(rids))
        await asyncio.Event().wait()


def hanging(fake) -> AbortHangs:
    return AbortHangs(url=fake.url, model="m", tokenizer=qwen3_tokenizer())


async def test_a_backend_hanging_on_abort_neither_extends_the_deadline_nor_holds_the_slot(fake, monkeypatch, caplog):
    monkeypatch.setattr(cancellation, "ABORT_TIMEOUT", 0.3)
    fake.delay = 5
    backend = hanging(fake)
    evaluator = replace(fake_evaluator(fake, request_timeout=0.3), backend=backend)
    started = time.monotonic()
    with pytest.raises(EvaluationTimeout):
        await evaluation_run(evaluator=evaluator, request=REQUEST)
    assert time.monotonic() - started < 1.5  # the 0.3 s deadline, not the deadline plus a hanging abort
    assert evaluator.gate.active == 0 and backend.asked == []  # the abort has not even started yet
    with caplog.at_level(logging.WARNING, logger="inference.cancellation"):
        await asyncio.sleep(0.5)
    assert len(backend.asked) == 1  # it ran in the background, was given up, and said so
    assert "backend abort of 2 request(s) failed: TimeoutError()" in caplog.text  # the warm-up, the branch


async def test_a_cancelled_evaluation_returns_before_its_abort_does(fake):
    fake.delay = 5
    backend = hanging(fake)
    evaluator = replace(fake_evaluator(fake), backend=backend)
    task = asyncio.create_task(evaluation_run(evaluator=evaluator, request=REQUEST))
    await asyncio.to_thread(fake.wait_in_flight, 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, timeout=1)
    assert evaluator.gate.active == 0
    await asyncio.sleep(0.05)
    assert len(backend.asked) == 1


async def test_aborts_are_deduplicated_and_bounded(fake, monkeypatch, caplog):
    monkeypatch.setattr(cancellation, "MAX_PENDING_ABORTS", 2)
    backend = hanging(fake)
    with caplog.at_level(logging.WARNING, logger="inference.cancellation"):
        for i in range(3):
            abort_schedule(backend=backend, rids=[f"r{i}", f"r{i}", f"s{i}"])
        abort_schedule(backend=backend, rids=[])
        await asyncio.sleep(0.05)
    assert backend.asked == [["r0", "s0"], ["r1", "s1"]]
    assert "2 backend aborts already pending: not aborting 2 more request(s)" in caplog.text

"""Batch lines yield to interactive requests on SGLang's priority scheduling: with `OPENJEV_BATCH_PRIORITY` set,
batch lines' backend calls send it and every other call sends the interactive priority, never nothing (SGLang puts
a call without a priority behind all others); unset, no call sends one. Against a running `serve`:
test_sdk_serve.py."""

from __future__ import annotations

from dataclasses import replace

import pytest
from django.conf import settings

from inference.backends.base import Prefix
from inference.backends.sglang import SGLangBackend
from inference.priority import INTERACTIVE_PRIORITY, backend_priority_set
from serving.evaluator import backend_create
from testbed.qwen3 import qwen3_dir

PREFIX = Prefix(ids=tuple(range(1000, 1010)))


async def _priorities_sent(fake, *, batch_priority: int | None) -> list[int | None]:
    """(an interactive call's priority, a batch line's) as the backend received them."""
    config = replace(
        settings.OPENJEV,
        backend="sglang",
        backend_url=fake.url,
        tokenizer=str(qwen3_dir()),
        batch_priority=batch_priority,
    )
    backend = backend_create(config=config)
    assert isinstance(backend, SGLangBackend)
    await backend.warm(rid="interactive", prefix=PREFIX)
    with backend_priority_set(priority=config.batch_priority):
        await backend.warm(rid="batch-line", prefix=PREFIX)
    await backend.close()
    return [record["body"].get("priority") for record in fake.requests]


@pytest.mark.parametrize("batch_priority", [-7, 3])
async def test_with_a_batch_priority_batch_lines_send_it_and_interactive_calls_send_theirs(fake, batch_priority):
    assert await _priorities_sent(fake, batch_priority=batch_priority) == [INTERACTIVE_PRIORITY, batch_priority]


async def test_without_a_batch_priority_no_call_sends_one(fake):
    assert await _priorities_sent(fake, batch_priority=None) == [None, None]

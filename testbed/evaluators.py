"""Evaluators built as the service builds its own, on an SGLang-speaking URL (the fake, or a gateway in
front of fakes) with the real Qwen3 tokenizer, so their answers can be predicted exactly."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.conf import settings

from fake_sglang import FakeSGLang
from inference.backends.base import BranchMode
from inference.backends.sglang import SGLangBackend
from inference.runner import Evaluator
from serving.evaluator import evaluator_build
from testbed.qwen3 import qwen3_tokenizer

MODEL = "Qwen/Qwen3.6-35B-A3B"


def url_evaluator(url: str, *, branch_mode: BranchMode = "batched", **overrides: Any) -> Evaluator:
    """An evaluator on the server at `url`, the process's settings changed by `overrides`."""
    config = replace(settings.OPENJEV, backend="sglang", backend_url=url, **overrides)
    backend = SGLangBackend(
        url=url,
        model=MODEL,
        tokenizer=qwen3_tokenizer(),
        branch_mode=branch_mode,
        max_in_flight=config.max_concurrent_branches,
        timeout=config.request_timeout,
    )
    return evaluator_build(config=config, backend=backend)


def fake_evaluator(server: FakeSGLang, *, branch_mode: BranchMode = "batched", **overrides: Any) -> Evaluator:
    return url_evaluator(server.url, branch_mode=branch_mode, **overrides)

"""Shared pieces of the embedded-model tests (`-m embedded`).

The assembled GGUF files live in the user cache, shared by every test module, so each bundled model is
assembled (hundreds of MB) once per machine, not once per module; a module loads its model once and
serves it through the real ASGI application with `api_on`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from pathlib import Path

import httpx
from django.conf import settings

from inference.backends.llamacpp import LlamaCppBackend, llamacpp_backend_create
from serving.evaluator import evaluator_build, evaluator_install

SMALL = "qwen2.5-coder-0.5b"
"""The fast bundled model, for tests of plumbing rather than of answers."""


def models_cache_dir() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "openjev" / "models"


@contextmanager
def bundled_backend(*, source: str, n_ctx: int = 4096, threads: int | None = None) -> Iterator[LlamaCppBackend]:
    """A bundled model loaded into llama.cpp, closed afterwards (a module fixture's body)."""
    backend = llamacpp_backend_create(source=source, cache_dir=models_cache_dir(), n_ctx=n_ctx, threads=threads)
    try:
        yield backend
    finally:
        backend.close()


@asynccontextmanager
async def api_on(*, backend: LlamaCppBackend) -> AsyncIterator[httpx.AsyncClient]:
    """The real ASGI application served by `backend` with the settings' scoring, through a client. The
    request timeout is lifted: these tests are about answers, on a CPU that other work may be sharing."""
    from openjev_site.asgi import application

    evaluator = evaluator_build(config=replace(settings.OPENJEV, backend="local"), backend=backend)
    evaluator_install(replace(evaluator, timeout=600.0))
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=application), base_url="http://testserver", timeout=600
        ) as client:
            yield client
    finally:
        evaluator_install(None)

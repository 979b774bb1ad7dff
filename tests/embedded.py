"""Shared pieces of the embedded-model tests (`-m embedded`).

The assembled GGUF files live where the service assembles them (`OPENJEV_MODEL_CACHE`, by default the
checkout's `.cache/models`), shared by every test module and by `make serve`, so each bundled model is
assembled (up to 1.1 GB) once per checkout, not once per module nor once more for the tests; a module
loads its model once and serves it through the real ASGI application with `api_on`.
"""

from __future__ import annotations

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
    """The service's model cache, the one `make serve` fills: a second copy would cost another 1.1 GB."""
    return Path(settings.OPENJEV.model_cache)


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

"""Where the embedded-model tests keep the assembled GGUF files: the user cache, shared by every test
module, so each bundled model is assembled (hundreds of MB) once per machine, not once per module."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from pathlib import Path

import httpx
from django.conf import settings

from evaluations.evaluator import evaluator_build, evaluator_install
from inference.backends.llamacpp import LlamaCppBackend, llamacpp_backend_create


def models_cache_dir() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "openjev" / "models"


PLUMBING_SOURCE = "qwen2.5-coder-0.5b"
"""The small bundled model: fast enough on CPU for tests about plumbing rather than answer quality."""


@contextmanager
def plumbing_backend() -> Iterator[LlamaCppBackend]:
    """The plumbing model on one thread (module-scoped fixtures share it), closed afterwards."""
    backend = llamacpp_backend_create(source=PLUMBING_SOURCE, cache_dir=models_cache_dir(), n_ctx=8192, threads=1)
    try:
        yield backend
    finally:
        backend.close()


@asynccontextmanager
async def embedded_client(backend: LlamaCppBackend) -> AsyncIterator[httpx.AsyncClient]:
    """The real ASGI app on an evaluator over `backend` (the service's own build: debiasing as configured)."""
    from openjev_site.asgi import application

    evaluator_install(evaluator_build(config=replace(settings.OPENJEV, backend="local"), backend=backend))
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=application), base_url="http://testserver",
                                     timeout=600) as client:
            yield client
    finally:
        evaluator_install(None)

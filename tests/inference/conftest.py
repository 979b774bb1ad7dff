"""The bundled 0.5B model loaded once per module for the llama.cpp backend's tests (`-m embedded`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from inference.backends.llamacpp import LlamaCppBackend
from inference.gguf import gguf_resolve
from inference.labels import Labels, labels_build
from inference.prompt_text import prompt_ending
from tests.embedded import SMALL, bundled_backend, models_cache_dir
from tests.inference.llamacpp import THREADS


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaCppBackend]:
    with bundled_backend(source=SMALL, threads=THREADS) as backend:
        yield backend


@pytest.fixture(scope="module")
def recompute(llama: LlamaCppBackend) -> Iterator[LlamaCppBackend]:
    """The same model with prefix reuse off: every generation evaluated from scratch."""
    path = gguf_resolve(source=SMALL, cache_dir=models_cache_dir())
    backend = LlamaCppBackend(model_path=path, n_ctx=4096, threads=THREADS, prefix_reuse=False)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def labels(llama: LlamaCppBackend) -> Labels:
    return labels_build(tokenizer=llama.tokenizer(), count=255, ending=prompt_ending(tokenizer=llama.tokenizer()))

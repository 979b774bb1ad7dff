"""tiktoken encodes the Qwen tokenizer's text exactly as HF `tokenizers` does, and is used only where
`tokenizer.json` has the shape that makes it so."""

from __future__ import annotations

import copy
import json
import random
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from inference.bpe_fast import tiktoken_encoder_build
from testbed.qwen3 import qwen3_dir, qwen3_tokenizer

ROOT = Path(__file__).resolve().parents[2]
SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>"]
SCRIPTS = [
    (0x20, 0x7F),
    (0xA0, 0x2FF),
    (0x300, 0x36F),
    (0x400, 0x4FF),
    (0x590, 0x6FF),
    (0x900, 0x97F),
    (0x3040, 0x30FF),
    (0x4E00, 0x4FFF),
    (0xAC00, 0xAD00),
    (0x1F300, 0x1F6FF),
    (0x2000, 0x206F),
]


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((qwen3_dir() / "tokenizer.json").read_bytes())
    return loaded


def corpus() -> list[str]:
    """Markdown and Python (this project's docs, the standard library's sources), random Unicode from
    a dozen scripts with combining marks and odd whitespace, and added tokens inside text."""
    texts = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md"))] + [
        (ROOT / "README.md").read_text(encoding="utf-8")
    ]
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts += [p.read_text(encoding="utf-8", errors="replace")[:20_000] for p in sorted(stdlib.glob("*.py"))[:60]]
    lines = [line for text in texts for line in text.splitlines(keepends=True)]
    rng = random.Random(7)
    alphabet = [chr(c) for lo, hi in SCRIPTS for c in range(lo, hi)] + list(" \t\n\r\n  \u00a0\u3000\u200b'0123456789")
    fuzz = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60))) for _ in range(4000)]
    mixed = [
        rng.choice(SPECIALS).join(rng.sample(lines, 2)) + rng.choice(["\u0338", "\u0301", " ", ""]) for _ in range(1000)
    ]
    return texts + lines + fuzz + mixed


def test_the_qwen_tokenizer_is_encoded_by_tiktoken():
    assert qwen3_tokenizer().fast


def test_tiktoken_gives_the_ids_tokenizers_gives_on_text_code_unicode_and_added_tokens():
    tokenizer = qwen3_tokenizer()
    texts = corpus()
    assert len(texts) > 10_000
    mismatched = [t for t in texts if tokenizer.encode(t) != tokenizer._reference_encode(t)]
    assert mismatched == []


@pytest.mark.parametrize(
    "change", ["normalizer NFKC", "merge out of rank order", "added token lstrip", "two regex splits", "byte fallback"]
)
def test_a_tokenizer_of_another_shape_keeps_tokenizers(spec, change):
    changed = copy.deepcopy(spec)
    if change == "normalizer NFKC":
        changed["normalizer"] = {"type": "NFKC"}
    elif change == "merge out of rank order":
        merges = changed["model"]["merges"]
        merges[10], merges[11] = merges[11], merges[10]
    elif change == "added token lstrip":
        changed["added_tokens"][0]["lstrip"] = True
    elif change == "two regex splits":
        steps = changed["pre_tokenizer"]["pretokenizers"]
        steps.insert(0, steps[0])
    else:
        changed["model"]["byte_fallback"] = True
    assert tiktoken_encoder_build(spec=changed, reference=qwen3_tokenizer()._reference_encode) is None


def test_a_disagreement_on_a_probe_keeps_tokenizers(spec, caplog):
    assert tiktoken_encoder_build(spec=spec, reference=lambda text: [0]) is None
    assert "disagrees" in caplog.text

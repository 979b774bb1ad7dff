"""`text` prompts, tokenized server-side as SGLang does: its TokenizerManager calls the model's fast tokenizer
on the request's text (a batch's texts in one call, special tokens added as the tokenizer's post-processor
says: none for Qwen), and the ids then go on exactly as `input_ids` would.

The fake has no tokenizer unless it is given one (`FakeSGLang(tokenizer=text_tokenizer_load(directory))`,
`python -m fake_sglang --tokenizer DIR`): without one it refuses text as SGLang does when started with
`--skip-tokenizer-init`. With a real one (the tests' and benchmarks' Qwen3 tokenizer) `prompt_tokens` and
`cached_tokens` are the real counts, and the tokenizing CPU lands in the fake's process, as it lands in
SGLang's and not in its client's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tokenizers import Tokenizer

TextTokenizer = Callable[[list[str]], list[list[int]]]
"""Texts to their token ids, one list per text."""


def text_tokenizer_load(directory: Path | str) -> TextTokenizer:
    """The `tokenizer.json` of a model directory, as SGLang's fast tokenizer encodes a batch of texts."""
    core = Tokenizer.from_file(str(Path(directory) / "tokenizer.json"))

    def tokenize(texts: list[str]) -> list[list[int]]:
        return [encoding.ids for encoding in core.encode_batch(texts)]

    return tokenize

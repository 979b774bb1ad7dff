"""The state's tokenization through tiktoken, for tokenizers that are tiktoken vocabularies in HF form.

HF `tokenizers` spends most of its time on a byte-level BPE tokenizer in its pre-tokenizer (the
Oniguruma regex split): about 450 µs for a 590-token state on the development machine, where tiktoken
reads the same vocabulary, with the same split pattern, in 70 µs (`bench/tokenization.py`). Qwen's
vocabulary was a tiktoken one before it was converted to `tokenizer.json` (one merge per token, merge
order = token id), so tiktoken is its reference implementation, not an approximation of it.

Used only when `tokenizer.json` is exactly that shape (byte-level BPE, NFC or no normalizer, one regex
split, ranks in merge order, added tokens matched literally) and when both agree on a set of probe texts
at load; anything else keeps HF `tokenizers`. `tests/inference/test_bpe_fast.py` compares the two on
this project's docs, the standard library's sources, random Unicode and added tokens inside text.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Callable
from typing import Any

import tiktoken

log = logging.getLogger(__name__)

Encode = Callable[[str], list[int]]

LONG_PIECE_CHARACTERS = 262_144
"""Text between added tokens longer than this goes to HF `tokenizers` instead: tiktoken's split pattern overflows
its regex's stack (a Rust panic, which Python cannot catch as an Exception) on a run of whitespace near a million
characters, which a two-megabyte body can send; HF reads it, in about a second."""

PROBES = (
    "Hello, world! It's a test: 12345 apples; naïve café, 東京, emoji 👍🏽 and\ttabs\n\nnew  lines   ",
    "<|im_start|>user\nIs this a refund request?<|im_end|>\n<|im_start|>assistant\n",
    "  leading spaces, trailing spaces   \r\n\r\n'll 've 're 'S 'T don't",
    "e\u0301 composed by NFC; \u00a0non-breaking; zero\u200bwidth",
    "<|im_end|>\u0338 a combining mark after an added token, which NFC would join to its last character",
)


def byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, reversed: the character each byte is written as in `tokenizer.json`."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    codes = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codes.append(256 + extra)
            extra += 1
    return {chr(code): byte for byte, code in zip(printable, codes, strict=True)}


def _split_pattern(pre_tokenizer: Any) -> str | None:
    """The regex of a `Sequence[Split(Isolated), ByteLevel(use_regex=False)]` pre-tokenizer, else None."""
    if not isinstance(pre_tokenizer, dict) or pre_tokenizer.get("type") != "Sequence":
        return None
    steps = pre_tokenizer.get("pretokenizers")
    if not isinstance(steps, list) or len(steps) != 2:
        return None
    split, byte_level = steps
    if (
        split.get("type") != "Split"
        or split.get("behavior") != "Isolated"
        or split.get("invert")
        or not isinstance(split.get("pattern"), dict)
        or not isinstance(split["pattern"].get("Regex"), str)
    ):
        return None
    if byte_level.get("type") != "ByteLevel" or byte_level.get("use_regex") or byte_level.get("add_prefix_space"):
        return None
    pattern: str = split["pattern"]["Regex"]
    return pattern


def _ranks(model: Any) -> dict[bytes, int] | None:
    """Token bytes → id, when ids are tiktoken ranks: byte-level BPE whose merge i makes token 256 + i."""
    if (
        not isinstance(model, dict)
        or model.get("type") != "BPE"
        or model.get("dropout") is not None
        or model.get("byte_fallback")
        or model.get("continuing_subword_prefix")
        or model.get("end_of_word_suffix")
        or model.get("ignore_merges")
    ):
        return None
    vocab, merges = model.get("vocab"), model.get("merges")
    if not isinstance(vocab, dict) or not isinstance(merges, list) or len(vocab) != 256 + len(merges):
        return None
    decoder = byte_decoder()
    try:
        ranks = {bytes(decoder[ch] for ch in token): rank for token, rank in vocab.items()}
        for index, merge in enumerate(merges):
            left, right = merge if isinstance(merge, list) else merge.split(" ")
            if vocab[left + right] != 256 + index:
                return None
    except (KeyError, ValueError):
        return None
    if sorted(rank for token, rank in ranks.items() if len(token) == 1) != list(range(256)):
        return None
    return ranks


def _specials(added: Any) -> dict[str, int] | None:
    """Added tokens by text, when HF matches them literally in the raw text and none contains another (so the
    order they are searched in cannot matter)."""
    if not isinstance(added, list):
        return None
    specials: dict[str, int] = {}
    for token in added:
        if token.get("lstrip") or token.get("rstrip") or token.get("single_word") or token.get("normalized"):
            return None
        specials[token["content"]] = token["id"]
    if any(a != b and a in b for a in specials for b in specials):
        return None
    return specials


def tiktoken_encoder_build(*, spec: dict[str, Any], reference: Encode) -> Encode | None:
    """An encoder equal to `reference` (HF `tokenizers` on the same `tokenizer.json`) and faster, or None
    when the tokenizer is not a tiktoken vocabulary or the two disagree on a probe."""
    normalizer = spec.get("normalizer")
    if normalizer is not None and normalizer.get("type") != "NFC":
        return None
    pattern, ranks = _split_pattern(spec.get("pre_tokenizer")), _ranks(spec.get("model"))
    specials = _specials(spec.get("added_tokens", []))
    if pattern is None or ranks is None or specials is None:
        return None
    encoding = tiktoken.Encoding("openjev", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    nfc = normalizer is not None
    # As HF does: added tokens are found in the raw text, then each piece between them is normalized and
    # split (normalizing first could join a token's last character with a combining mark after it).
    special_split = re.compile("|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True)))

    def encode(text: str) -> list[int]:
        ids: list[int] = []
        start = 0
        for found in special_split.finditer(text) if specials else ():
            if found.start() > start:
                ids += _ordinary(text[start : found.start()])
            ids.append(specials[found.group()])
            start = found.end()
        if start < len(text):
            ids += _ordinary(text[start:])
        return ids

    def _ordinary(piece: str) -> list[int]:
        if len(piece) > LONG_PIECE_CHARACTERS:
            return reference(piece)
        return encoding.encode_ordinary(unicodedata.normalize("NFC", piece) if nfc else piece)

    for probe in PROBES:
        if encode(probe) != reference(probe):
            log.warning("tiktoken disagrees with tokenizers on %r; the state is tokenized by tokenizers", probe)
            return None
    return encode

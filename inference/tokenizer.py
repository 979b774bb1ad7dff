"""Tokenizer adapters: one interface over HF `tokenizers` files and a llama.cpp model.

Labels, prompts and budgets are computed against this interface only, so the label alphabet is
always validated against the tokenizer of the model that is actually served.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from tokenizers import Tokenizer as HFTokenizerCore

from inference.bpe_fast import tiktoken_encoder_build
from inference.chat_template import ChatTemplate
from inference.errors import StartupError


class Tokenizer(Protocol):
    """What the prompt compiler needs from a tokenizer."""

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, special-token markup parsed, nothing added around it."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids`, special tokens included."""
        ...

    def render_chat(self, messages: Sequence[dict[str, Any]]) -> str:
        """The chat template's text for `messages`, generation prompt on, thinking off."""
        ...


def _token_text(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


class HFTokenizer:
    """`tokenizer.json` through HF `tokenizers`, plus `tokenizer_config.json`'s chat template; text is
    encoded by tiktoken instead where the vocabulary is a tiktoken one (`inference/bpe_fast.py`)."""

    def __init__(self, core: HFTokenizerCore, template: ChatTemplate, *, spec: dict[str, Any] | None = None) -> None:
        self._core = core
        self._template = template
        self._fast = None if spec is None else tiktoken_encoder_build(spec=spec, reference=self._reference_encode)

    @property
    def fast(self) -> bool:
        """Whether tiktoken encodes (the same ids, about six times faster)."""
        return self._fast is not None

    def encode(self, text: str) -> list[int]:
        return self._fast(text) if self._fast is not None else self._reference_encode(text)

    def _reference_encode(self, text: str) -> list[int]:
        return list(self._core.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._core.decode(list(ids), skip_special_tokens=False))

    def render_chat(self, messages: Sequence[dict[str, Any]]) -> str:
        return self._template.render(messages)


def hf_tokenizer_load(*, directory: Path) -> HFTokenizer:
    """Load a local tokenizer directory (as shipped with a model's weights)."""
    tokenizer_file = directory / "tokenizer.json"
    config_file = directory / "tokenizer_config.json"
    if not tokenizer_file.is_file():
        raise StartupError(f"no tokenizer.json in {directory}")
    try:
        config = json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else {}
    except json.JSONDecodeError as exc:
        raise StartupError(f"{config_file} is not JSON: {exc}") from exc
    template = config.get("chat_template")
    jinja_file = directory / "chat_template.jinja"
    if template is None and jinja_file.is_file():
        template = jinja_file.read_text(encoding="utf-8")
    if isinstance(template, list):  # several named templates: HF picks "default"
        template = next((t["template"] for t in template if t.get("name") == "default"), None)
    if not isinstance(template, str):
        raise StartupError(f"{directory} has no chat template")
    specials = {
        name: text
        for name in ("bos_token", "eos_token", "pad_token", "unk_token")
        if (text := _token_text(config.get(name))) is not None
    }
    text = tokenizer_file.read_text(encoding="utf-8")  # read once: tokenizers and tiktoken both build from it
    return HFTokenizer(
        HFTokenizerCore.from_str(text), ChatTemplate(template, special_tokens=specials), spec=json.loads(text)
    )


def hf_tokenizer_resolve(*, source: str, revision: str | None) -> HFTokenizer:
    """A local directory, or a model id whose files are already in the Hugging Face cache (where SGLang
    put them, loading the model on this machine). Never a download: the service runs offline, and a
    replica must not start on whatever the hub serves that day."""
    path = Path(source).expanduser()
    if path.is_dir():
        return hf_tokenizer_load(directory=path)
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError
    except ImportError as exc:
        raise StartupError(
            f"tokenizer {source!r} is not a local directory and huggingface_hub, which reads the model cache, "
            "is not installed"
        ) from exc
    try:
        local = snapshot_download(
            source,
            revision=revision,
            allow_patterns=["tokenizer.json", "tokenizer_config.json", "chat_template.jinja"],
            local_files_only=True,
        )
    except (HFValidationError, LocalEntryNotFoundError) as exc:
        raise StartupError(
            f"tokenizer {source!r} is neither a local directory nor in the Hugging Face cache (nothing is downloaded)"
        ) from exc
    return hf_tokenizer_load(directory=Path(local))

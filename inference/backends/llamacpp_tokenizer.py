"""The embedded backend's tokenizer: the GGUF's own vocabulary and chat template, read through llama.cpp.

Apart from the backend (`inference.backends.llamacpp`) because it never touches the llama context, only the
model's vocabulary: what it encodes and decodes is safe from the event loop while the worker thread evaluates.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import llama_cpp

from inference.chat_template import ChatTemplate
from inference.errors import StartupError


class LlamaTokenizer:
    """The `Tokenizer` protocol over the GGUF's own vocabulary and chat template.

    Encoding and decoding only read the vocabulary (never the context), so they are safe to call
    from the event loop while the worker thread evaluates.
    """

    def __init__(self, llm: llama_cpp.Llama) -> None:
        self._llm = llm
        self._vocab = llm._model.vocab
        source = llm.metadata.get("tokenizer.chat_template")
        if not source:
            raise StartupError("the GGUF file has no chat template (tokenizer.chat_template)")
        specials = {
            name: self.decode([token])
            for name, token in (("bos_token", llm.token_bos()), ("eos_token", llm.token_eos()))
            if token >= 0
        }
        self._template = ChatTemplate(source, special_tokens=specials)

    def encode(self, text: str) -> list[int]:
        if not text:
            return []
        return list(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def decode(self, ids: Sequence[int]) -> str:
        # Bytes are joined before decoding so a character split across byte tokens survives; a lone
        # partial byte becomes U+FFFD, which can never equal a label and so never passes as one.
        return b"".join(self._piece(token) for token in ids).decode("utf-8", errors="replace")

    def render_chat(self, messages: Sequence[dict[str, Any]]) -> str:
        return self._template.render(messages)

    @lru_cache(maxsize=4096)  # noqa: B019 - one tokenizer per loaded model, kept for its lifetime
    def _piece(self, token: int) -> bytes:
        """A token's bytes, special tokens included.

        llama-cpp-python's own detokenize uses a fixed 32-byte buffer and corrupts longer pieces
        (Qwen has long whitespace and punctuation runs), so the buffer grows on demand here.
        """
        size = 64
        while True:
            buffer = ctypes.create_string_buffer(size)
            n = llama_cpp.llama_token_to_piece(self._vocab, llama_cpp.llama_token(token), buffer, size, 0, True)
            if n >= 0:
                return buffer.raw[:n]
            size = -n

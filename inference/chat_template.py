"""Chat templates rendered the way Hugging Face `apply_chat_template` renders them.

Production tokenizes on our side and sends token ids, so our rendering must match the text the
model was trained on byte for byte: same sandbox, same whitespace control, same `tojson`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from functools import cached_property
from typing import Any

from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from inference.errors import StartupError


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


def _tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


class ChatTemplate:
    """A compiled chat template plus the special tokens it may refer to."""

    def __init__(self, source: str, *, special_tokens: dict[str, str] | None = None) -> None:
        self.source = source
        self.special_tokens = dict(special_tokens or {})

    @cached_property
    def _compiled(self) -> Any:
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = _strftime_now
        try:
            return env.from_string(self.source)
        except TemplateError as exc:
            raise StartupError(f"the chat template does not compile: {exc}") from exc

    def render(self, messages: Sequence[dict[str, Any]]) -> str:
        """Render with the generation prompt on and thinking off (the answer is one label)."""
        return str(self._compiled.render(messages=list(messages), add_generation_prompt=True,
                                         enable_thinking=False, **self.special_tokens))

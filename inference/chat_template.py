"""Chat templates rendered the way Hugging Face `apply_chat_template` renders them.

Production tokenizes on our side and sends token ids, so our rendering must match the text the
model was trained on byte for byte: same sandbox, same whitespace control, same `tojson`.

The transcript is the client's, and a template only knows the shapes it was written for: `tool_calls`
that are not a list of objects, a role order the template refuses with `raise_exception`, a field of
the wrong type. A template that renders a plain one-message chat but fails on this one failed because
of the request: a `RequestInvalid` located at the state, whatever the exception.
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

from inference.errors import Problem, RequestInvalid, StartupError

PLAIN_CHAT = ({"role": "user", "content": "Hello"},)
"""A conversation every chat template renders: the shape of our own closing turn."""
TEMPLATE_ERROR_CHARS = 300


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


def _tojson(
    x: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
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
        """Render with the generation prompt on and thinking off (the answer is one label); a failure
        caused by `messages` raises RequestInvalid, one the template has on any chat StartupError."""
        try:
            return self._render(messages)
        except (StartupError, MemoryError):
            raise
        except Exception as exc:
            if not self._renders_plain_chat:
                raise StartupError(f"the chat template cannot render a one-message chat: {exc}") from exc
            message = f"the model's chat template cannot render this conversation: {exc}"[:TEMPLATE_ERROR_CHARS]
            raise RequestInvalid([Problem(("state",), message, "chat_template")]) from exc

    def _render(self, messages: Sequence[dict[str, Any]]) -> str:
        return str(
            self._compiled.render(
                messages=list(messages), add_generation_prompt=True, enable_thinking=False, **self.special_tokens
            )
        )

    @cached_property
    def _renders_plain_chat(self) -> bool:
        try:
            self._render(PLAIN_CHAT)
        except Exception:
            return False
        return True

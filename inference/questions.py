"""Typed questions as the core sees them, after the API has validated the request."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any, Literal

QuestionType = Literal["noul", "choice", "score"]
QUESTION_TYPES: tuple[QuestionType, ...] = ("noul", "choice", "score")
Shape = Literal["noul", "choice 2", "choice 3-5", "choice 6+", "score"]
"""What a question's scoring is tuned for (`inference.tuning`): models treat two options and several
differently, and the bench measures choices of at most five, so more are a shape of their own."""
SHAPES: tuple[Shape, ...] = ("noul", "choice 2", "choice 3-5", "choice 6+", "score")

NOUL_DEFAULTS = {"true": "Yes", "false": "No"}


@dataclass(frozen=True)
class Option:
    """One answer option: `key` is returned to the caller, `text` is what the model reads."""

    key: str
    text: str


@dataclass(frozen=True)
class Question:
    id: str
    type: QuestionType
    instructions: str | None
    options: tuple[Option, ...]
    levels: tuple[Any, ...] = ()  # score levels as sent, echoed in the legend

    @functools.cached_property
    def identity(self) -> tuple[str, str | None, tuple[tuple[str, str], ...]]:
        """What makes two questions the same whatever their ids: type, instructions and options in order.
        Computed once per object: the API reuses a parsed question for every request that sends it again."""
        return self.type, self.instructions, tuple((o.key, o.text) for o in self.options)

    @functools.cached_property
    def characters(self) -> int:
        """Characters of the texts the prompt compiler tokenizes for this question (its instructions and its
        options' texts), once per object: the runner sizes every request's text before compiling it."""
        return len(self.instructions or "") + sum(len(o.text) for o in self.options)

    @functools.cached_property
    def shape(self) -> Shape:
        """The shape whose tuning scores this question, once per object (read for every branch of every
        request that sends it). Choices of more than five options are apart because nothing has measured
        them: a setting measured on five need not carry over to 255, whose option orders each cost a long
        prompt."""
        if self.type != "choice":
            return self.type
        count = len(self.options)
        return "choice 2" if count <= 2 else "choice 3-5" if count <= 5 else "choice 6+"


def text_render(value: Any) -> str:
    """Strings verbatim; structured values as compact JSON with key order and non-ASCII kept."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def question_build(*, id: str, type: QuestionType, instructions: Any, criteria: Any) -> Question:
    """Turn validated JSON into a Question; the API has already checked shapes and counts."""
    text = None if instructions is None else text_render(instructions)
    if type == "noul":
        sides = criteria or {}
        options = tuple(
            Option(key=side, text=_noul_side(sides.get(side), NOUL_DEFAULTS[side])) for side in ("true", "false")
        )
        return Question(id=id, type=type, instructions=text, options=options)
    if type == "choice":
        options = tuple(
            Option(key=key, text=key if desc is None else text_render(desc)) for key, desc in criteria.items()
        )
        return Question(id=id, type=type, instructions=text, options=options)
    levels = tuple(criteria)
    options = tuple(Option(key=str(i), text=text_render(level)) for i, level in enumerate(levels))
    return Question(id=id, type=type, instructions=text, options=options, levels=levels)


def _noul_side(value: Any, default: str) -> str:
    """A missing, null or empty side reads as the default, so the model never sees a blank option."""
    if value is None or value == "":
        return default
    return text_render(value)

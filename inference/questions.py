"""Typed questions as the core sees them, after the API has validated the request."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any, Literal

from inference.images import Image

QuestionType = Literal["noul", "choice", "score"]
QUESTION_TYPES: tuple[QuestionType, ...] = ("noul", "choice", "score")
Shape = Literal["noul", "choice 2", "choice 3-5", "choice 6+", "score"]
"""What a question's scoring is tuned for (`inference.tuning`): models treat two options and several
differently, and the bench measures choices of at most five, so more are a shape of their own."""
SHAPES: tuple[Shape, ...] = ("noul", "choice 2", "choice 3-5", "choice 6+", "score")

NOUL_DEFAULTS = {"true": "Yes", "false": "No"}
Identity = tuple[Any, ...]
"""A question's identity (`Question.identity`): (type, instructions, options), and its instructions' parts when they
hold images."""


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
    parts: tuple[str | Image, ...] = ()
    """Instructions that hold images (a Decisions question's `input_image` parts): their text and images in order,
    one entry per part as sent, so a problem is located at its index. `instructions` is then their texts joined with
    newlines (what is stored and counted); the prompt reads consecutive texts joined with newlines and each image
    where it stands (`inference.prompt_text.instructions_text`). Empty for text-only instructions, whose prompt is
    exactly `instructions`."""

    @property
    def images(self) -> tuple[Image, ...]:
        """The images of the instructions, in order (none for text-only instructions)."""
        return tuple(p for p in self.parts if not isinstance(p, str))

    @functools.cached_property
    def identity(self) -> Identity:
        """What makes two questions the same whatever their ids: type, instructions and options in order, and for
        instructions that hold images, their parts with each image by its digest (`image_key`): the images' places
        change the prompt, and another image is another question. Computed once per object: the API reuses a parsed
        question for every request that sends it again."""
        options = tuple((o.key, o.text) for o in self.options)
        if not self.parts:
            return self.type, self.instructions, options
        layout = tuple(p if isinstance(p, str) else (image_key(p),) for p in self.parts)
        return self.type, self.instructions, options, layout

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


def image_key(image: Image) -> str:
    """What tells an image apart without its bytes: its SHA-256 (every image held as bytes has one), else its URL."""
    return image.meta.sha256 or image.url


def text_render(value: Any) -> str:
    """Strings verbatim; structured values as compact JSON with key order and non-ASCII kept."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def question_build(
    *, id: str, type: QuestionType, instructions: Any, criteria: Any, parts: tuple[str | Image, ...] = ()
) -> Question:
    """Turn validated JSON into a Question; the API has already checked shapes and counts. `parts`: instructions
    that hold images, as text and images in order (`instructions` is then their texts joined with newlines);
    parts without an image are plain text instructions."""
    text = None if instructions is None else text_render(instructions)
    if all(isinstance(p, str) for p in parts):
        parts = ()
    if type == "noul":
        sides = criteria or {}
        options = tuple(
            Option(key=side, text=_noul_side(sides.get(side), NOUL_DEFAULTS[side])) for side in ("true", "false")
        )
        return Question(id=id, type=type, instructions=text, options=options, parts=parts)
    if type == "choice":
        options = tuple(
            Option(key=key, text=key if desc is None else text_render(desc)) for key, desc in criteria.items()
        )
        return Question(id=id, type=type, instructions=text, options=options, parts=parts)
    levels = tuple(criteria)
    options = tuple(Option(key=str(i), text=text_render(level)) for i, level in enumerate(levels))
    return Question(id=id, type=type, instructions=text, options=options, levels=levels, parts=parts)


def _noul_side(value: Any, default: str) -> str:
    """A missing, null or empty side reads as the default, so the model never sees a blank option."""
    if value is None or value == "":
        return default
    return text_render(value)

"""The state of a System One request as the conversation the model reads, and the checker both
parsers share: problems located in the body, and every image found with where it was.

See `api.systemone.parsing` for the wire forms of images; this module turns each into `Image` parts of
a user message, splitting the state's strings at the `assets` placeholders.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

import ahocorasick

from api.checking.images import ImageLimits, image_of_url, images_refused, is_image_url
from api.checking.json_body import Loc, json_kind
from api.checking.limits import messages_over
from inference.errors import Problem, value_quoted
from inference.images import Image, ImageMeta
from inference.questions import text_render
from inference.requests import ROLES, Message, Part, Role, conversation_of_text

UNKNOWN_KEYS_NAMED = 50
"""Unknown keys of one object named one problem each (as many as an answer lists); the rest counted in one more."""


def is_text(value: Any) -> bool:
    """A text field may be a string, an object or an array (structured text the model reads as JSON)."""
    return isinstance(value, str | dict | list)


class Checker:
    """Collects every problem of a body (the client fixes them all at once) and every image of its state."""

    def __init__(self, *, assets: Mapping[str, Image] | None = None, limits: ImageLimits | None = None) -> None:
        self.problems: list[Problem] = []
        self.assets = dict(assets or {})
        self.image_limits = limits or ImageLimits()
        self.images: list[tuple[Image, Loc]] = []
        """Every image of the state, where it was found (for the limits' problems)."""
        self.images_read = 0
        """Images met so far, valid or not: what the count allowed is spent on."""
        self.images_refused = False
        """Whether an image over the count allowed was met (the rest are not read)."""
        self._placeholders = {escaped: _placeholder_finder(self.assets, escaped=escaped) for escaped in (False, True)}

    def add(self, loc: Loc, msg: str, type_: str) -> None:
        self.problems.append(Problem(loc, msg, type_))

    def image_admit(self, loc: Loc) -> bool:
        """Whether one more image may be read at `loc`: not once the count allowed is reached, when the first one
        over is the problem and no further image is read (each is checked, maybe decoded, before it counts)."""
        if self.images_read < self.image_limits.max_images:
            self.images_read += 1
            return True
        if not self.images_refused:
            self.images_refused = True
            self.problems.append(images_refused(loc=loc, limits=self.image_limits))
        return False

    def unknown_keys(
        self, item: dict[str, Any], allowed: AbstractSet[str], loc: Loc, *, message: Callable[[str], str], type_: str
    ) -> None:
        """A problem for each key of `item` that `allowed` lacks, the first `UNKNOWN_KEYS_NAMED` by name and the rest
        counted in one more: 150,000 unknown fields were 150,000 problems, a second of CPU (the objects, and the
        garbage collector's passes over them) to answer with fifty."""
        unknown = [key for key in item if key not in allowed]
        for key in unknown[:UNKNOWN_KEYS_NAMED]:
            self.add((*loc, key), message(key), type_)
        if len(unknown) > UNKNOWN_KEYS_NAMED:
            self.add(loc, f"and {len(unknown) - UNKNOWN_KEYS_NAMED} more unknown fields", type_)

    def count(self, items: dict[str, Any] | list[Any], loc: Loc, *, limit: int, what: str) -> bool:
        """Whether `items` holds 2 to `limit` entries (a problem is added when not)."""
        if 2 <= len(items) <= limit:
            return True
        self.add(
            loc,
            f"A {what} needs 2 to {limit} {'options' if what == 'choice' else 'levels'}, got {len(items)}",
            "too_short" if len(items) < 2 else "too_long",
        )
        return False

    def parts(self, text: str, loc: Loc, *, escaped: bool = False) -> list[Part]:
        """`text` split at the asset placeholders it holds (`escaped`: as they read in JSON text), the longest
        placeholder where several start at one place, in time linear in `text`; each one counts as an image."""
        finder = self._placeholders[escaped]
        if finder is None:
            return [text] if text else []
        parts: list[Part] = []
        start = 0
        for last, (key, length) in finder.iter_long(text):
            if not self.image_admit(loc):
                break
            image = self.assets[key]
            parts += [text[start : last + 1 - length], image]
            self.images.append((image, loc))
            start = last + 1
        parts.append(text[start:])
        return [p for p in parts if p != ""]

    def holds_placeholder(self, value: Any) -> bool:
        finder = self._placeholders[True]
        return finder is not None and next(finder.iter(text_render(value)), None) is not None

    def image_read(self, value: Any, loc: Loc) -> Image | None:
        """The image URL at `loc` as an image, recorded for the limits; None (and its problem) when it is invalid
        or over the count allowed."""
        if not self.image_admit(loc):
            return None
        image = image_of_url(value=value, loc=loc, limits=self.image_limits)
        if isinstance(image, Problem):
            self.problems.append(image)
            return None
        self.images.append((image, loc))
        return image

    def text(self, value: Any, loc: Loc, *, nullable: bool) -> None:
        if value is None and nullable:
            return
        if not is_text(value):
            expected = "a string, object or array" + (" or null" if nullable else "")
            self.add(loc, f"Input should be {expected}, got {json_kind(value)}", "text_type")


def _placeholder_finder(assets: Mapping[str, Image], *, escaped: bool) -> ahocorasick.Automaton | None:
    """The placeholders (as they read in JSON text, when `escaped`), each found with its asset's key and its own
    length. An Aho-Corasick automaton reads a text once whatever the placeholders: a pattern alternating them
    tries each at every character, which 20,000 placeholders over a 200,000-character state made 12.5 s."""
    if not assets:
        return None
    finder = ahocorasick.Automaton()
    for key in assets:
        placeholder = json.dumps(key, ensure_ascii=False)[1:-1] if escaped else key
        finder.add_word(placeholder, (key, len(placeholder)))
    finder.make_automaton()
    return finder


def conversation_check(check: Checker, state: Any) -> tuple[Message, ...]:
    """A chat transcript (a non-empty list of objects with `role`, bare or as `{"messages": [...]}`) is
    kept as sent; an object with an `images` list of image URLs is those images, then the rest of the
    object; any other state is one user message, structured values as compact JSON."""
    loc: Loc
    if isinstance(state, dict) and list(state) == ["messages"]:
        candidate, loc = state["messages"], ("state", "messages")
    else:
        candidate, loc = state, ("state",)
    if isinstance(candidate, list) and candidate and all(isinstance(m, dict) and "role" in m for m in candidate):
        over = messages_over(count=len(candidate))
        if over is not None:
            check.add(loc, over, "token_limit")
            return ()
        messages = [_message_check(check, message, (*loc, i)) for i, message in enumerate(candidate)]
        return tuple(m for m in messages if m is not None)
    images: list[Part] = []
    if (
        isinstance(state, dict)
        and isinstance(state.get("images"), list)
        and state["images"]
        and all(map(is_image_url, state["images"]))
    ):
        images = [_image_check(check, url, ("state", "images", i)) for i, url in enumerate(state["images"])]
        state = {key: value for key, value in state.items() if key != "images"}
    text = "" if images and state == {} else text_render(state)
    parts = [*images, *check.parts(text, ("state",), escaped=not isinstance(state, str))]
    if not any(isinstance(part, Image) for part in parts):
        return conversation_of_text(text=text)
    return (Message(role="user", content=tuple(parts)),)


def _image_check(check: Checker, value: Any, loc: Loc) -> Image:
    """The image at `loc`, or an image nobody sees while the rest is checked (its problem is recorded)."""
    return check.image_read(value, loc) or _INVALID


_INVALID = Image(url="", meta=ImageMeta(source="url"))
"""Stands for an invalid image while the rest of the request is checked; never evaluated."""


def _message_check(check: Checker, message: dict[str, Any], loc: Loc) -> Message | None:
    role = message["role"]
    if role not in ROLES:
        check.add((*loc, "role"), f"role must be one of {', '.join(sorted(ROLES))}", "enum")
        return None
    content = message.get("content")
    if content is None or isinstance(content, str):
        parts = check.parts(content or "", (*loc, "content"))
    elif isinstance(content, list):
        found = _content_parts(check, content, (*loc, "content"))
        if found is None:
            return None
        parts = found
    else:
        check.add((*loc, "content"), "content must be a string or a list of text and image_url parts", "type_error")
        return None
    extra = tuple((key, value) for key, value in message.items() if key not in ("role", "content"))
    if not any(isinstance(part, Image) for part in parts):
        return Message(role=_role(role), content="".join(p for p in parts if isinstance(p, str)), extra=extra)
    if role != "user":
        check.add(
            (*loc, "content"),
            f"images are accepted in user messages only, not in a {role} message",
            "unsupported_content",
        )
        return None
    return Message(role="user", content=tuple(parts), extra=extra)


def _role(value: str) -> Role:
    return next(role for role in ROLES if role == value)


def _content_parts(check: Checker, items: list[Any], loc: Loc) -> list[Part] | None:
    """A content list as text and images in order, consecutive texts joined with newlines; None (and a
    problem) at the first part that is neither text nor `image_url`."""
    parts: list[Part] = []
    texts: list[str] = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str):
            texts.append(item["text"])
        elif isinstance(item, dict) and item.get("type") == "image_url" and isinstance(item.get("image_url"), dict):
            parts += [
                *check.parts("\n".join(texts), (*loc, i)),
                _image_check(check, item["image_url"].get("url"), (*loc, i, "image_url", "url")),
            ]
            texts = []
        else:
            kind = item.get("type") if isinstance(item, dict) else type(item).__name__
            check.add(
                (*loc, i),
                f"only text and image_url content is supported, got {value_quoted(kind)}",
                "unsupported_content",
            )
            return None
    return [*parts, *check.parts("\n".join(texts), loc)]

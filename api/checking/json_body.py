"""A request body as JSON: strict decoding, and what JSON can carry but no prompt, answer or database can.

Both endpoints read their bodies through here before validating their own shapes, so a lone surrogate
or an overflowing number is refused, located, the same way on each.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import sys
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Any

import orjson

from inference.errors import Problem
from inference.lru import SizedLRU

Loc = tuple[str | int, ...]


class _ConstantRejected(ValueError):
    pass


class BodyNotJson(ValueError):
    """The body is not strict JSON; `position` is where it breaks (a character, or a byte of bad UTF-8),
    as FastAPI locates its `json_invalid` errors."""

    def __init__(self, message: str, *, position: int = 0) -> None:
        super().__init__(message)
        self.position = position


def _reject_constant(name: str) -> Any:
    raise _ConstantRejected(f"{name} is not valid JSON")


_DIGITS_MARKED = bytes(0x31 if 0x30 <= byte <= 0x39 else 0x30 for byte in range(256))
"""Every byte to `1` if it is a digit, else `0`: a body so translated holds `_LONG_RUN` where it has 19 digits in a
row, which could be an integer beyond 64 bits, which orjson reads as a float (the standard library keeps it an
integer). A translation and a substring search are a millisecond a megabyte; a regular expression for the same
run tries every digit again (ten times as long on a body of many short numbers)."""
_LONG_RUN = b"1" * 19


def body_parse(raw: bytes) -> Any:
    """Strict JSON: UTF-8 only, no NaN/Infinity. Raises BodyNotJson with a readable message.

    What JSON's grammar allows but no text or number can hold (a lone surrogate escape, a number
    beyond a double) parses here and is refused, located, by `document_problems`.

    orjson reads a body first, in about two fifths of the standard library's time (a large body holds the
    interpreter for its whole decoding, so every other request of the process waits that long: the body lane's
    module): where both read a document they read it alike, except an integer beyond 64 bits, which orjson makes a
    float, so a body with a run of 19 digits anywhere goes to the standard library, as does every body orjson
    refuses (its errors, lone surrogates, numbers beyond a double), so what is refused and how is as before."""
    if _LONG_RUN not in raw.translate(_DIGITS_MARKED):
        with contextlib.suppress(orjson.JSONDecodeError):
            return orjson.loads(raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyNotJson(f"the body is not UTF-8: {exc}", position=exc.start) from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise BodyNotJson("the body is nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise BodyNotJson(f"the body is not JSON: {exc}", position=exc.pos) from None
    except _ConstantRejected as exc:
        raise BodyNotJson(f"the body is not JSON: {exc}") from None
    except ValueError:  # Python refuses to convert longer integers (a denial-of-service guard)
        raise BodyNotJson(f"the body has an integer of more than {sys.get_int_max_str_digits()} digits") from None


NESTING_MAX = 128
"""Levels of arrays and objects a body may nest: far beyond any real state, far below the depth at
which rendering, the chat template or storage would run out of stack."""
DOCUMENT_PROBLEMS_MAX = 20
_SURROGATE = re.compile("[\ud800-\udfff]")


def _text_invalid(text: str) -> bool:
    return not text.isascii() and _SURROGATE.search(text) is not None


def _value_invalid(value: Any) -> bool:
    if isinstance(value, str):
        return _text_invalid(value)
    return isinstance(value, float) and not math.isfinite(value)


def _document_clean(data: Any) -> bool:
    """The fast pass, level by level without building locations: most bodies are clean. Only the exact
    types JSON decodes to are passed here, tested inline (a 64-question body has hundreds of strings)."""
    level, depth = [data], 0
    while level:
        below: list[Any] = []
        for value in level:
            kind = type(value)
            if kind is str:
                if not value.isascii() and _SURROGATE.search(value) is not None:
                    return False
            elif kind is dict:
                if depth >= NESTING_MAX or any(_text_invalid(key) for key in value if not key.isascii()):
                    return False
                below.extend(value.values())
            elif kind is list:
                if depth >= NESTING_MAX:
                    return False
                below.extend(value)
            elif kind is float:
                if not math.isfinite(value):
                    return False
            elif kind is not int and kind is not bool and value is not None:
                return False  # not a type JSON decodes to (a subclass, a tuple): the full walk decides
        level, depth = below, depth + 1
    return True


def text_printable(text: str) -> str:
    """`text` with lone surrogates as U+FFFD, so it can be echoed in a UTF-8 answer (a location)."""
    return _SURROGATE.sub("\ufffd", text)


def _surrogate_problem(loc: Loc, text: str, what: str) -> Problem:
    found = _SURROGATE.search(text)
    code = f"\\u{ord(found.group()):04x}" if found else ""
    return Problem(
        loc, f"{what} is not valid Unicode text: it holds a lone UTF-16 surrogate ({code})", "string_unicode"
    )


def _children(steps: Iterable[tuple[str | int, Any]], *, loc: Loc) -> Iterator[tuple[Any, Loc, str | None]]:
    """A container's children one at a time, located under `loc`; an object's with its key (JSON keys are
    strings, array indexes ints), which is checked before its value."""
    for step, item in steps:
        yield item, (*loc, step), step if isinstance(step, str) else None


def document_problems(*, data: Any) -> list[Problem]:
    """What JSON can carry but no prompt, answer or database can, anywhere in the body, keys included:
    lone UTF-16 surrogates (`"\\ud800"` is valid JSON, yet UTF-8 cannot encode it), numbers beyond a
    double (`1e400` parses as infinity, which JSON cannot say back) and nesting deeper than
    `NESTING_MAX`. Checked before anything else reads the body; at most `DOCUMENT_PROBLEMS_MAX` reported,
    located relative to the body."""
    if _document_clean(data):
        return []
    problems: list[Problem] = []
    # A stack of iterators, not of entries: a container's children are visited one at a time, so a list of a
    # million bad strings costs as many steps as the problems reported, not a million located entries built first.
    stack: list[Iterator[tuple[Any, Loc, str | None]]] = [iter([(data, (), None)])]
    while stack and len(problems) < DOCUMENT_PROBLEMS_MAX:
        entry = next(stack[-1], None)
        if entry is None:
            stack.pop()
            continue
        value, loc, key = entry
        if key is not None and _text_invalid(key):
            problems.append(_surrogate_problem((*loc[:-1], text_printable(key)), key, "This key"))
        elif isinstance(value, dict | list) and len(loc) >= NESTING_MAX:  # `loc` has one step per level
            problems.append(
                Problem(loc, f"Arrays and objects may nest at most {NESTING_MAX} levels deep", "nesting_too_deep")
            )
        elif isinstance(value, dict):
            stack.append(_children(value.items(), loc=loc))
        elif isinstance(value, list):
            stack.append(_children(enumerate(value), loc=loc))
        elif isinstance(value, str) and _text_invalid(value):
            problems.append(_surrogate_problem(loc, value, "Input"))
        elif _value_invalid(value):
            problems.append(
                Problem(loc, "Input should be a finite number; this one overflows a 64-bit float", "finite_number")
            )
    return problems


def json_kind(value: Any) -> str:
    """The JSON name of a value's type, as validation messages say it."""
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


JsonKeyed = tuple[Hashable, ...]
"""A cache key: what the value's meaning depends on besides its JSON (its id, the limits), then that JSON."""


def json_cached[V](
    *, cache: SizedLRU[JsonKeyed, V], key: tuple[Hashable, ...], value: Any, build: Callable[[], V | None]
) -> V | None:
    """`build()` for a piece of a body (a question), answered from `cache` when the same `key` and JSON were
    valid before: callers send the same questions with ever new inputs. Keyed by orjson's text, which is
    unambiguous once `document_problems` has refused NaN and infinities (orjson writes either as `null`);
    an invalid piece (None) is never cached, so its problems are found again each time."""
    try:
        text = orjson.dumps(value)
    except orjson.JSONEncodeError:  # an integer beyond 64 bits: checked every time
        return build()
    full = (*key, text)
    found = cache.get(full)
    if found is None:
        found = build()
        if found is not None:
            cache.put(full, found)
    return found


def json_cache_cost(key: JsonKeyed, value: object) -> int:
    """What a cached piece costs: its JSON (three times, for the objects built from it) and its id."""
    text = key[-1]
    assert isinstance(text, bytes), "the key ends with the JSON"
    return 400 + sum(len(part) for part in key[:-1] if isinstance(part, str)) + 3 * len(text)


JSON_CACHE_BYTES = 16 << 20
"""What one cache of valid pieces may hold, as `json_cache_cost` counts it: each wire format keeps one."""


def json_cache_new[V]() -> SizedLRU[JsonKeyed, V]:
    """An empty cache of valid pieces for `json_cached`, bounded by `JSON_CACHE_BYTES`."""
    return SizedLRU(max_bytes=JSON_CACHE_BYTES, cost=json_cache_cost)

"""JSON as the API writes it, in one place: response bodies, the error bodies written before Django runs,
and the WebSocket stream's messages.

Compact UTF-8, and strict: NaN and infinity are refused (`allow_nan=False`), because a bug must fail, not
answer `null`. orjson writes a body in a twentieth of the standard library's time (a 64-answer body:
10 µs, against 210 µs), but it writes NaN and infinity as `null` without a word, and it spells small
floats its own way (`0.00001`, `3.1e-7` where the standard library writes `1e-05`, `3.1e-07`). So a body
that holds a `null` or a non-finite float goes to the standard library, which refuses the floats and writes
such a body (every classify response) byte for byte as before; any other body goes to orjson, as before.
Which one is decided from orjson's text first: where it holds no `null` at all (every System One and
Decisions answer) the body held neither, and that text is the answer (1 µs to look, where a walk over
the 64 answers' values took 35-50 µs); only a text with `null` in it (a real one, or the word inside a
string) is decided by that walk.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from django.http import HttpResponse

_ORJSON_STRICT = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS
"""Dataclasses, dates and subclasses of the JSON types are passed to the standard library, which writes a
subclass (a `StrEnum`) as its base type and refuses the rest: orjson would write them all."""


def body_encode(*, body: Any) -> bytes:
    """`body` as compact UTF-8 JSON. Anything orjson cannot write as the standard library would (keys that
    are not strings, integers over 64 bits, the types passed through) is written by the standard library."""
    try:
        encoded = orjson.dumps(body, option=_ORJSON_STRICT)
    except TypeError:  # orjson.JSONEncodeError included
        return text_encode(value=body).encode("utf-8")
    if b"null" in encoded and _null_holds(value=body):  # orjson writes None, NaN and infinity as `null`
        return text_encode(value=body).encode("utf-8")
    return encoded


def text_encode(*, value: Any) -> str:
    """The standard library's compact, strict JSON: the stream's messages, and the bodies orjson does not
    write (ValueError for NaN and infinity, TypeError for what JSON cannot hold)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def json_response(*, body: Any, status: int = 200, headers: dict[str, str] | None = None) -> HttpResponse:
    response = HttpResponse(body_encode(body=body), status=status, content_type="application/json")
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def _null_holds(*, value: Any) -> bool:
    """Whether JSON of `value` holds a `null` or a non-finite float (what orjson would write as `null`).
    Exact type tests: the containers and floats of a rendered body are never subclasses, and anything
    else is left to the encoder."""
    stack = [value]
    pop, extend = stack.pop, stack.extend
    while stack:
        item = pop()
        kind = type(item)
        if kind is dict:
            extend(item.values())
        elif kind is list or kind is tuple:
            extend(item)
        elif kind is float:
            if item - item != 0.0:  # NaN and infinity: the difference is NaN, which equals nothing
                return True
        elif item is None:
            return True
    return False

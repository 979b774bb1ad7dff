"""A request's body as the views read it and a format's service parses it: decoded, then parsed with the format's
`FormatCheck`, each in the body lane when the body is large (`api.plumbing.body_lane`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from api.checking.json_body import BodyNotJson, body_parse
from api.plumbing.api_error import body_invalid
from api.plumbing.body_lane import body_lane_run
from api.plumbing.formats import ErrorShape
from api.plumbing.multipart import MultipartInvalid, is_multipart, multipart_parse

MAX_PARTS_BEYOND_IMAGES = 8
"""Multipart parts a body may have beyond one per allowed image (the `request` part, and slack)."""


@dataclass(frozen=True)
class Body:
    """A request's body: its JSON, and a multipart body's other parts (images) by name."""

    data: Any
    size: int
    """Bytes the body had as sent (decoded): what decides where it is read (`api.plumbing.body_lane`)."""
    parts: dict[str, bytes] = field(default_factory=dict)


def body_parts_max() -> int:
    """The most parts a multipart body may have under the settings now in force."""
    return settings.OPENJEV.max_images + MAX_PARTS_BEYOND_IMAGES


def body_decode(*, raw: bytes, content_type: str, shape: ErrorShape, max_parts: int) -> Body:
    """The body as JSON (and parts); one that is not JSON is answered as the route's shape says (a multipart one
    that breaks is a located 422, `multipart_invalid`)."""
    parts: dict[str, bytes] = {}
    size = len(raw)
    if is_multipart(content_type):
        try:
            parsed = multipart_parse(body=raw, content_type=content_type, max_parts=max_parts)
        except MultipartInvalid as exc:
            raise body_invalid(message=str(exc), error_type="multipart_invalid") from None
        raw, parts = parsed.request, parsed.parts
    try:
        return Body(data=body_parse(raw), size=size, parts=parts)
    except BodyNotJson as exc:
        raise shape.json_invalid(exc) from None


async def request_parsed[T](*, data: Any, parse: Callable[..., T], size: int, **bound: Any) -> T:
    """The format's request of a read body (`parse`, a `FormatCheck.parse`, with `bound` arguments such as the
    multipart parts), parsed in the body lane when the body is large."""
    return await body_lane_run(work=functools.partial(parse, data=data, **bound), size=size)

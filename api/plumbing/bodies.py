"""A request's body as the views read it and a format's service parses it: decoded, then parsed with the format's
`FormatCheck`, both in one turn of the body lane when the body is large (`api.plumbing.body_lane`)."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from api.checking.json_body import BodyNotJson, body_parse
from api.plumbing.api_error import body_invalid
from api.plumbing.body_lane import body_lane_run
from api.plumbing.formats import ErrorShape, FormatCheck
from api.plumbing.metering import phase_timed
from api.plumbing.multipart import MultipartInvalid, is_multipart, multipart_parse

MAX_PARTS_BEYOND_IMAGES = 8
"""Multipart parts a body may have beyond one per allowed image (the `request` part, and slack)."""


@dataclass(frozen=True)
class Parsed:
    """A format's parse of a body, run where the body was decoded: its request, or the error the parse raised, for
    the format's service to take where it would parse (so the error is answered and recorded there, as its own)."""

    request: Any = None
    error: Exception | None = None

    def request_taken(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.request


@dataclass(frozen=True)
class Body:
    """A request's body: its JSON, a multipart body's other parts (images) by name, and its format's parse when the
    view ran it in the body's turn of the lane (`body_checked`)."""

    data: Any
    size: int
    """Bytes the body had as sent (decoded): what decides where it is read (`api.plumbing.body_lane`)."""
    parts: dict[str, bytes] = field(default_factory=dict)
    parsed: Parsed | None = None


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


def body_checked(body: Body, *, check: FormatCheck) -> Body:
    """The body with its format's parse (`check`, the format's `FormatCheck`) kept, whatever it raised: called in
    the turn that decoded the body, so a large body waits for the lane once, not again to be parsed."""
    with phase_timed("validate"):
        try:
            parsed = Parsed(request=check.body_parse(data=body.data, parts=body.parts))
        except Exception as exc:  # raised where the service parses (`request_parsed`), answered as its own
            parsed = Parsed(error=exc)
    return dataclasses.replace(body, parsed=parsed)


async def request_parsed(*, body: Body, check: FormatCheck) -> Any:
    """The format's request of a read body: the parse the view kept (`body_checked`), else parsed with `check` now,
    in the body lane when the body is large (a stream's message, a batch's line)."""
    if body.parsed is not None:
        return body.parsed.request_taken()
    with phase_timed("validate"):
        work = functools.partial(check.body_parse, data=body.data, parts=body.parts)
        return await body_lane_run(work=work, size=body.size)

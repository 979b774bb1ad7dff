"""`multipart/form-data` bodies (RFC 7578) as the official SDK sends assets: a `request` part holding the
JSON, then one part per image (`asset-0`, `asset-1`, ...), which the JSON's `assets` name.

Parsed here, strictly and in memory, rather than by Django's upload handlers: the body reader
(`api.plumbing.request_body`) has already bounded and decoded the whole body, every part included,
and Django's parser would spool files to disk and apply limits of its own. The number of parts is
capped too, so a body of a million empty parts is refused before any of them is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from inference.errors import value_quoted

REQUEST_PART = "request"
_BOUNDARY = re.compile(r'boundary=(?:"([^"]{1,70})"|([^\s;"]{1,70}))', re.IGNORECASE)
_NAME = re.compile(r'(?:^|;)\s*name="([^"]*)"', re.IGNORECASE)


class MultipartInvalid(ValueError):
    """The body is not the multipart form the API takes; the message says where it breaks."""


@dataclass(frozen=True)
class MultipartBody:
    request: bytes
    """The `request` part: the JSON body."""
    parts: dict[str, bytes]
    """Every other part's content by name."""


def is_multipart(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == "multipart/form-data"


def multipart_parse(*, body: bytes, content_type: str, max_parts: int) -> MultipartBody:
    """The parts of `body`; raises MultipartInvalid for anything but named parts that each appear once,
    the first one `request`, at most `max_parts` of them."""
    found = _BOUNDARY.search(content_type)
    if found is None:
        raise MultipartInvalid("the multipart Content-Type has no boundary")
    delimiter = b"--" + (found.group(1) or found.group(2)).encode("latin-1")
    if not body.startswith(delimiter):
        raise MultipartInvalid("the body does not start with the multipart boundary")
    chunks = body.split(b"\r\n" + delimiter)
    chunks[0] = chunks[0][len(delimiter) :]
    if len(chunks) < 2 or not chunks[-1].startswith(b"--"):
        raise MultipartInvalid("the multipart body has no closing boundary")
    if len(chunks) - 1 > max_parts:
        raise MultipartInvalid(f"the multipart body has {len(chunks) - 1} parts, over the limit of {max_parts}")
    parts: dict[str, bytes] = {}
    for index, chunk in enumerate(chunks[:-1]):
        name, content = _part_read(chunk, index)
        if name in parts:
            raise MultipartInvalid(f"the multipart part {value_quoted(name)} appears twice")
        parts[name] = content
    if next(iter(parts), None) != REQUEST_PART:
        raise MultipartInvalid(f"the first multipart part must be {REQUEST_PART!r}, holding the JSON request")
    return MultipartBody(request=parts.pop(REQUEST_PART), parts=parts)


def _part_read(chunk: bytes, index: int) -> tuple[str, bytes]:
    """(name, content) of one part: its headers up to the blank line, then its content."""
    if not chunk.startswith(b"\r\n"):
        raise MultipartInvalid(f"multipart part {index} does not start on a new line after its boundary")
    head, blank, content = chunk[2:].partition(b"\r\n\r\n")
    if not blank:
        raise MultipartInvalid(f"multipart part {index} has no blank line after its headers")
    for line in head.split(b"\r\n"):
        header, _, value = line.decode("latin-1").partition(":")
        if header.strip().lower() == "content-disposition":
            name = _NAME.search(value)
            if name and name.group(1):
                return name.group(1), content
    raise MultipartInvalid(f"multipart part {index} has no Content-Disposition name")

"""An image as the core carries it: the URL the backend is sent, and what may be kept of it.

It stands apart from the conversation (`inference.requests`) and the questions (`inference.questions`)
because both hold images: a user message's parts and a question's instructions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class ImageMeta:
    """What is kept and logged of an image: never its bytes nor its URL.

    `source` is how the client sent it. `format`, `size` and `sha256` are None for an http(s) URL the backend
    fetches itself; a URL the service fetched (`OPENJEV_IMAGE_URL_HOSTS`) has them, as bytes do."""

    source: Literal["data", "url"]
    format: str | None = None
    size: int | None = None
    """Bytes of the image file."""
    sha256: str | None = None


@dataclass(frozen=True)
class Image:
    """An image in a user message or a question's instructions. `url` goes to the backend as it is: an http(s)
    URL, or a `data:` URL holding the bytes (bytes the client uploaded become one)."""

    url: str
    meta: ImageMeta

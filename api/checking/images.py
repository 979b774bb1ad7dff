"""Images as clients send them, checked into the core's `Image`, and kept out of storage.

Four wire forms reach here (see `api.systemone.parsing`): an http(s) URL, a `data:` URL, base64 text with
a declared format (`assets`, `data_base64`) and raw bytes (a multipart part). Bytes become a `data:` URL.
Bytes are checked by their magic bytes (the declared format only has to be one we take) and counted against
the per-image and per-request limits; nothing about an image is kept or logged beyond its source, format,
size and SHA-256.

A hosted (http(s)) URL: where the operator names no host (`OPENJEV_IMAGE_URL_HOSTS` unset, the default),
System One's go to the backend as they are (SGLang fetches them) and the Decisions routes refuse them. Where
it names hosts, every route takes only https URLs of those hosts (`hosted_image`), which the service fetches
itself before the evaluation (`api.checking.image_fetch`) and sends on as bytes, so the backend never fetches
a client's URL.

Only http(s) and `data:` URLs are accepted: SGLang also opens local file paths and other schemes it is
given, and a client must not name files on the model server.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from api.checking.json_body import Loc, json_kind
from inference.errors import Problem, value_quoted
from inference.images import Image, ImageMeta
from serving.setting_rules import HOST_NAME

FORMATS = ("png", "jpeg", "webp")
DECLARED_FORMATS = {"png": "png", "jpg": "jpeg", "jpeg": "jpeg", "webp": "webp"}
URL_MAX_CHARS = 4096
_WEB_URL = re.compile(r"https?://[^\s/?#]+(?:[/?#]\S*)?\Z", re.IGNORECASE)
"""An http(s) URL: a host, then a path, query or fragment. The host's characters and what may follow it share
none, so the pattern is linear in the URL (one where they overlapped backtracked quadratically on a URL that
ends in a space: 92 s for 500 such URLs)."""
_DATA_URL = re.compile(r"data:(?:image/[A-Za-z0-9.+-]+)?(?:;[A-Za-z0-9=.+-]+)*;base64,", re.IGNORECASE)


@dataclass(frozen=True)
class ImageLimits:
    max_images: int = 0
    """0: every image is refused (`images_not_supported`)."""
    max_image_bytes: int = 1 << 20
    max_request_image_bytes: int = 2 << 20
    url_hosts: tuple[str, ...] = ()
    """`OPENJEV_IMAGE_URL_HOSTS`: the hosts whose https image URLs the service fetches (exact, or `*.domain`); empty:
    none (System One's http(s) URLs then go to the backend as sent, the Decisions routes refuse them)."""


@dataclass(frozen=True)
class Hosted:
    """Where a hosted image URL points, as the fetcher connects: the URL's host name (lowercase, no trailing dot), its
    port, and the path and query to ask for."""

    host: str
    port: int
    target: str


def image_format(data: bytes) -> str | None:
    """The image format its first bytes show, among those we take."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if data.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return None


def image_of_bytes(*, data: bytes, loc: Loc, limits: ImageLimits) -> Image | Problem:
    """Raw image bytes as a `data:` URL, or the problem with them."""
    if len(data) > limits.max_image_bytes:
        return Problem(
            loc, f"the image is {len(data)} bytes, over the limit of {limits.max_image_bytes}", "image_too_large"
        )
    found = image_format(data)
    if found is None:
        return Problem(
            loc, f"the bytes are not an image in one of the accepted formats ({', '.join(FORMATS)})", "image_format"
        )
    url = f"data:image/{found};base64,{base64.b64encode(data).decode('ascii')}"
    return Image(
        url=url, meta=ImageMeta(source="data", format=found, size=len(data), sha256=hashlib.sha256(data).hexdigest())
    )


def image_of_base64(*, text: str, loc: Loc, limits: ImageLimits, url: str | None = None) -> Image | Problem:
    """Base64 text as an image; `url`, when given, is what goes to the backend (a `data:` URL as sent)."""
    if len(text) // 4 * 3 > limits.max_image_bytes + 2:  # before decoding anything
        return Problem(loc, f"the image is over the limit of {limits.max_image_bytes} bytes", "image_too_large")
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return Problem(loc, "the image data is not valid base64", "image_base64")
    image = image_of_bytes(data=data, loc=loc, limits=limits)
    return Image(url=url, meta=image.meta) if url and isinstance(image, Image) else image


def image_of_url(*, value: Any, loc: Loc, limits: ImageLimits) -> Image | Problem:
    """An image URL as sent: a base64 `data:` URL, checked here, or http(s): fetched by the backend, or where the
    operator allows hosts, by the service (`hosted_image`)."""
    if not isinstance(value, str):
        return Problem(loc, f"Input should be an image URL (http, https or data), got {json_kind(value)}", "image_url")
    data_url = _DATA_URL.match(value)
    if data_url:
        return image_of_base64(text=value[data_url.end() :], loc=loc, limits=limits, url=value)
    if len(value) > URL_MAX_CHARS or not _WEB_URL.match(value):  # the length first: the pattern reads it all
        return Problem(
            loc, f"an image URL must be http(s) (at most {URL_MAX_CHARS} characters) or a base64 data: URL", "image_url"
        )
    if limits.url_hosts:
        return hosted_image(url=value, loc=loc, limits=limits)
    return Image(url=value, meta=ImageMeta(source="url"))


HOSTS_SETTING = "OPENJEV_IMAGE_URL_HOSTS"
_TARGET_SAFE = "!$%&'()*+,/:;=?@[]~"
"""What a request target keeps as sent (`%` too: escapes stay escapes); anything else (a space, non-ASCII text) is
percent-encoded, as a browser sends it."""


def host_allowed(*, host: str, hosts: tuple[str, ...]) -> bool:
    """Whether `host` (lowercase, no trailing dot) is one of `hosts`: equal to an entry, or under the domain of a
    `*.domain` entry (any depth; the bare domain is not under it)."""
    return any(host == entry or (entry[:2] == "*." and host.endswith(entry[1:])) for entry in hosts)


def hosted_of(url: str) -> Hosted | str:
    """An https URL as the fetcher reads it, or why it cannot be fetched. The host is read once, here, and the
    fetcher connects to that host and asks for this target: no other parser reads the URL, so none can see
    another host in it."""
    try:
        parts = urlsplit(url)
        port = parts.port or 443
    except ValueError:
        return "the URL's host or port cannot be read"
    if parts.scheme.lower() != "https":
        return "only https image URLs are fetched"
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return "an image URL must not carry credentials"
    host = (parts.hostname or "").rstrip(".")
    if not HOST_NAME.fullmatch(host):
        return "the URL's host is not a host name (an internationalised name is taken in its xn-- form)"
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Hosted(host=host, port=port, target=quote(target, safe=_TARGET_SAFE))


def hosted_image(*, url: str, loc: Loc, limits: ImageLimits) -> Image | Problem:
    """An http(s) image URL where the operator allows hosts: an image the service will fetch (`url` as sent, its
    bytes unknown until then), or the problem (`image_url_not_allowed`) when it is not https or its host is not
    one of `OPENJEV_IMAGE_URL_HOSTS`."""
    found = hosted_of(url)
    if isinstance(found, str):
        return Problem(loc, f"{found}; send https from an allowed host or a base64 data: URL", "image_url_not_allowed")
    if not host_allowed(host=found.host, hosts=limits.url_hosts):
        return Problem(
            loc,
            f"this server fetches images only from the hosts its operator allows ({HOSTS_SETTING}), and "
            f"{value_quoted(found.host)} is not one; send the image as a base64 data: URL",
            "image_url_not_allowed",
        )
    return Image(url=url, meta=ImageMeta(source="url"))


def is_hosted(image: Image) -> bool:
    """Whether `image` is a hosted URL the service is still to fetch (not bytes as a `data:` URL)."""
    return image.meta.source == "url" and not image.url[:5].lower().startswith("data:")


def hosted_located(*, images: list[tuple[Image, Loc]], limits: ImageLimits) -> tuple[tuple[Image, Loc], ...]:
    """The images a parser found that the service is to fetch (`api.checking.image_fetch`), each with where it stands
    in the body: none unless the operator allows hosts."""
    return tuple((image, loc) for image, loc in images if is_hosted(image)) if limits.url_hosts else ()


def is_image_url(value: Any) -> bool:
    """Whether a state's `images` entry reads as an image URL (the seed's form), not as text."""
    return isinstance(value, str) and value[:8].lower().startswith(("http://", "https://", "data:"))


def images_refused(*, loc: Loc, limits: ImageLimits) -> Problem:
    """The problem of an image beyond the count `limits` allow, located where it stands: the first one over
    (every image refused where none are allowed). The checkers stop reading images there, so a body of a
    thousand image URLs costs no more than one over the limit."""
    if not limits.max_images:
        return Problem(loc, "this server does not accept images; send text only", "images_not_supported")
    return Problem(loc, f"the request holds more than {limits.max_images} images, the limit", "too_many_images")


def images_total_check(*, images: list[tuple[Image, Loc]], limits: ImageLimits) -> list[Problem]:
    """The request's images against the total-bytes limit (the count is checked as they are read)."""
    total = sum(image.meta.size or 0 for image, _ in images)
    if total <= limits.max_request_image_bytes:
        return []
    return [
        Problem(
            ("state",),
            f"the images are {total} bytes together, over the limit of {limits.max_request_image_bytes}",
            "images_too_large",
        )
    ]


def assets_check(
    *, value: Any, parts: Mapping[str, bytes], limits: ImageLimits
) -> tuple[dict[str, Image], list[Problem]]:
    """`assets` (placeholder -> asset) as images by placeholder; every multipart part must be claimed by
    exactly one asset, as the official API requires."""
    problems: list[Problem] = []
    if value is None:
        value = {}
    elif isinstance(value, dict) and len(value) > limits.max_images:  # before reading any of them
        return {}, [images_refused(loc=("assets",), limits=limits)]
    elif not isinstance(value, dict) or not value:
        return {}, [
            Problem(
                ("assets",),
                f"Input should be a non-empty object of placeholder to asset, got "
                f"{json_kind(value) if value != {} else 'an empty object'}",
                "dict_type",
            )
        ]
    images: dict[str, Image] = {}
    claimed: set[str] = set()
    for key, asset in value.items():
        loc: Loc = ("assets", key)
        if not key.strip():
            problems.append(Problem(loc, "an asset placeholder must be a non-empty string", "string_too_short"))
            continue
        image = _asset_image(asset=asset, loc=loc, parts=parts, claimed=claimed, limits=limits)
        if isinstance(image, Problem):
            problems.append(image)
        else:
            images[key] = image
    problems += [
        Problem(("assets",), f"the multipart part {value_quoted(name)} is not claimed by any asset", "part_unclaimed")
        for name in parts
        if name not in claimed
    ]
    return images, problems


def _asset_image(
    *, asset: Any, loc: Loc, parts: Mapping[str, bytes], claimed: set[str], limits: ImageLimits
) -> Image | Problem:
    if not isinstance(asset, dict):
        return Problem(loc, f"Input should be an asset object, got {json_kind(asset)}", "dict_type")
    if asset.get("type", "image") != "image":
        return Problem(
            (*loc, "type"), f"Input tag {value_quoted(asset.get('type'))} is not 'image'", "union_tag_invalid"
        )
    part = asset.get("part")
    if part is not None:
        if not isinstance(part, str) or part not in parts:
            return Problem((*loc, "part"), f"no multipart part named {value_quoted(part)} was sent", "part_missing")
        if part in claimed:
            return Problem((*loc, "part"), f"the part {value_quoted(part)} is claimed by another asset", "part_claimed")
        claimed.add(part)
        return image_of_bytes(data=parts[part], loc=loc, limits=limits)
    declared, text = asset.get("format"), asset.get("data_base64")
    if not isinstance(text, str):
        return Problem((*loc, "data_base64"), "an asset needs data_base64 (base64 text) or part", "missing")
    if declared not in DECLARED_FORMATS:
        return Problem((*loc, "format"), f"format must be one of {', '.join(DECLARED_FORMATS)}", "enum")
    return image_of_base64(text=text, loc=loc, limits=limits)

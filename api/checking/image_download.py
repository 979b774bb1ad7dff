"""One hosted image fetched: connected to by a checked address under its host's name, read within its limits, and
checked to be an image.

Apart from `api.checking.image_fetch` (which fetches a request's images together, under one deadline and the
process's cap) so that what a single connection may do, and what it refuses, is read in one place.
"""

from __future__ import annotations

import functools
import ipaddress
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace

import httpx

from api.checking.image_addresses import IPAddress, Resolve, address_public, host_resolve
from api.checking.images import Hosted, ImageLimits, hosted_of, image_of_bytes
from inference.errors import Problem, value_quoted
from inference.images import Image

CONCURRENCY = 4
"""Fetches of one request at once."""
USER_AGENT = "openjev-image-fetch"
ACCEPT = "image/png, image/jpeg, image/webp"


@functools.cache
def _trusted() -> ssl.SSLContext:
    """The public CAs httpx trusts (certifi's), built once; never the environment's (`SSL_CERT_FILE`)."""
    return httpx.create_ssl_context(trust_env=False)


@dataclass(frozen=True)
class Fetcher:
    """How hosted images are fetched: the limits, and the seams tests replace (named for what they loosen)."""

    timeout: float
    """Seconds all the fetches of one request have together."""
    max_bytes: int
    """Bytes of one image (`OPENJEV_MAX_IMAGE_BYTES`)."""
    concurrency: int = CONCURRENCY
    resolve: Resolve = host_resolve
    address_allowed: Callable[[IPAddress], bool] = address_public
    """Test seam: the strict rule unless a test fetches from loopback."""
    ssl_context: ssl.SSLContext | None = field(default=None, compare=False)
    """Test seam: None trusts the public CAs; a test trusts its own certificate."""


class FetchFailed(Exception):
    """Why one image could not be fetched: the problem's message and type."""

    def __init__(self, message: str, kind: str = "image_fetch_failed") -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind


async def body_read(chunks: AsyncIterator[bytes], *, limit: int) -> bytes:
    """The body, or its first `limit` + 1 bytes once it is longer than `limit` (no further chunk is read)."""
    body = bytearray()
    async for chunk in chunks:
        body += chunk[: limit + 1 - len(body)]
        if len(body) > limit:
            break
    return bytes(body)


async def image_fetch(*, url: str, fetcher: Fetcher) -> Image:
    """The image at an https `url` of an allowed host as bytes (a `data:` URL; its metadata's source stays `url`);
    FetchFailed with the reason."""
    hosted = hosted_of(url)
    if isinstance(hosted, str):  # the parser refused such URLs already: this only guards the fetcher's own use
        raise FetchFailed(hosted, "image_url_not_allowed")
    try:
        found = await fetcher.resolve(hosted.host, hosted.port)
        addresses = list(dict.fromkeys(ipaddress.ip_address(a.split("%", 1)[0]) for a in found))
    except (OSError, ValueError):
        raise FetchFailed(f"the host {value_quoted(hosted.host)} could not be resolved") from None
    if not addresses:
        raise FetchFailed(f"the host {value_quoted(hosted.host)} could not be resolved")
    if not all(fetcher.address_allowed(a) for a in addresses):
        raise FetchFailed(
            f"the host {value_quoted(hosted.host)} resolves to an address this server does not fetch from (private, "
            "loopback, link-local, multicast, reserved or unspecified)",
            "image_url_not_allowed",
        )
    for address in addresses:
        try:
            data = await _get(hosted=hosted, address=address, fetcher=fetcher)
        except httpx.ConnectError:
            continue  # another address of the same checked list may answer
        image = image_of_bytes(data=data, loc=(), limits=ImageLimits(max_image_bytes=fetcher.max_bytes))
        if isinstance(image, Problem):
            raise FetchFailed(f"the URL's content: {image.msg}", image.type)
        return replace(image, meta=replace(image.meta, source="url"))
    raise FetchFailed(f"no address of {value_quoted(hosted.host)} could be connected to over TLS")


async def _get(*, hosted: Hosted, address: IPAddress, fetcher: Fetcher) -> bytes:
    """GET the target from `address`, named `hosted.host` (SNI, certificate, `Host`); the body, at most the limit
    + 1 bytes."""
    authority = hosted.host if hosted.port == 443 else f"{hosted.host}:{hosted.port}"
    url = httpx.URL(scheme="https", host=str(address), port=hosted.port, raw_path=hosted.target.encode("ascii"))
    headers = {"Host": authority, "Accept": ACCEPT, "Accept-Encoding": "identity", "User-Agent": USER_AGENT}
    async with (
        httpx.AsyncClient(
            verify=fetcher.ssl_context or _trusted(),
            trust_env=False,
            follow_redirects=False,
            timeout=httpx.Timeout(fetcher.timeout),
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=0),
        ) as client,
        client.stream("GET", url, headers=headers, extensions={"sni_hostname": hosted.host}) as response,
    ):
        status = response.status_code
        if 300 <= status < 400:
            raise FetchFailed(
                f"the image URL redirects (HTTP {status}); redirects are not followed: send the image's own URL"
            )
        if status != 200:
            raise FetchFailed(f"the image server answered HTTP {status}")
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise FetchFailed(f"the image server sent a {value_quoted(encoding)}-encoded body; it must send it as is")
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > fetcher.max_bytes:
            raise FetchFailed(
                f"the image is {int(length)} bytes, over the limit of {fetcher.max_bytes}", "image_too_large"
            )
        data = await body_read(response.aiter_raw(), limit=fetcher.max_bytes)
    if len(data) > fetcher.max_bytes:
        raise FetchFailed(f"the image is over the limit of {fetcher.max_bytes} bytes", "image_too_large")
    return data

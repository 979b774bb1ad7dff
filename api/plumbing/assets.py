"""Static files served by the API process itself (`GET /static/<path>`), and what every read-only page
of the service shares: the JSON 405 for other methods and ETag matching.

The reference pages work offline and behind a gateway that mounts the service under a path (`/jev/`):
static files are served by `asset_view` (with DEBUG off too, without a separate web server), because
Django's `static()` caches `STATIC_URL` with whichever prefix was current on first use.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import mimetypes
import os
import re
from dataclasses import dataclass

from django.contrib.staticfiles import finders
from django.core.exceptions import SuspiciousFileOperation
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt

from api.plumbing.api_error import ApiError
from api.plumbing.error_responses import error_response
from inference.errors import value_quoted

# Files under a versioned vendor folder never change at their URL; anything else may change on upgrade.
IMMUTABLE_PATH = re.compile(r"^vendor/[^/]+/\d[^/]*/")
IMMUTABLE_CACHE = "public, max-age=31536000, immutable"
REVALIDATE_CACHE = "public, max-age=3600"
COMPRESSIBLE = ("text/", "application/javascript", "application/json", "image/svg+xml")
GZIP_MIN_BYTES = 1024
SAFE_METHODS = ("GET", "HEAD")


def method_refused(request: HttpRequest) -> HttpResponse | None:
    """Our JSON 405 for anything but GET and HEAD, None for those."""
    if request.method in SAFE_METHODS:
        return None
    response = error_response(ApiError(405, "method_not_allowed", f'Method "{request.method}" not allowed.'))
    response["Allow"] = ", ".join(SAFE_METHODS)
    return response


def etag_matches(request: HttpRequest, etag: str) -> bool:
    header = request.headers.get("If-None-Match", "")
    return header.strip() == "*" or etag in (t.strip().removeprefix("W/") for t in header.split(","))


def asset_url(path: str) -> str:
    """A static file's URL under the current script prefix (resolved per request, never cached)."""
    return reverse("static-asset", kwargs={"path": path})


@dataclass(frozen=True)
class _Asset:
    stamp: tuple[int, int]
    body: bytes
    gzipped: bytes | None
    etag: str
    content_type: str


_assets: dict[str, _Asset] = {}


def _content_type(path: str) -> str:
    guessed = mimetypes.guess_type(path)[0] or "application/octet-stream"
    if path.endswith(".map"):
        guessed = "application/json"
    if guessed.startswith("text/") or guessed in ("application/javascript", "application/json"):
        return f"{guessed}; charset=utf-8"
    return guessed


def _asset_load(found: str, stamp: tuple[int, int]) -> _Asset:
    """Read (and gzip once) a static file; kept in memory, since the set of files is small and fixed."""
    with open(found, "rb") as handle:
        body = handle.read()
    content_type = _content_type(found)
    gzipped = None
    if len(body) >= GZIP_MIN_BYTES and content_type.startswith(COMPRESSIBLE):
        gzipped = gzip.compress(body, compresslevel=6, mtime=0)
    etag = hashlib.blake2b(body, digest_size=12).hexdigest()
    return _Asset(stamp=stamp, body=body, gzipped=gzipped, etag=etag, content_type=content_type)


def _accepts_gzip(request: HttpRequest) -> bool:
    for part in request.headers.get("Accept-Encoding", "").split(","):
        name, _, params = part.strip().partition(";")
        if name.strip().lower() in ("gzip", "*"):
            q = params.strip().removeprefix("q=").strip() if params.strip().startswith("q=") else "1"
            try:
                return float(q) > 0
            except ValueError:
                return False
    return False


def _find(path: str) -> str | None:
    if any(part.startswith(".") or not part for part in path.split("/")):
        return None
    try:
        found = finders.find(path)
    except (SuspiciousFileOperation, ValueError, OSError):
        return None
    return found if isinstance(found, str) and os.path.isfile(found) else None


@csrf_exempt  # read-only; exempt so a wrong method gets our JSON 405, not CSRF's HTML 403
async def asset_view(request: HttpRequest, path: str) -> HttpResponse:
    """`GET /static/<path>`: files the staticfiles finders know (the vendored bundles, the sidecar's
    Swagger UI, the admin's assets), with DEBUG on or off.

    Versioned vendor files are cacheable for a year; everything has an ETag; compressible files are
    gzipped once per process for clients that accept it (the Scalar bundle is 4.8 MB raw, 1.3 MB gzipped).
    """
    if (refused := method_refused(request)) is not None:
        return refused
    found = _find(path)
    if found is None:
        return error_response(ApiError(404, "not_found", f"no static file {value_quoted(path)}"))
    stat = os.stat(found)
    stamp = (stat.st_mtime_ns, stat.st_size)
    asset = _assets.get(found)
    if asset is None or asset.stamp != stamp:
        asset = await asyncio.to_thread(_asset_load, found, stamp)
        _assets[found] = asset
    use_gzip = asset.gzipped is not None and _accepts_gzip(request)
    etag = f'"{asset.etag}{"-gz" if use_gzip else ""}"'
    if etag_matches(request, etag):
        response = HttpResponse(status=304)
    else:
        response = HttpResponse(
            asset.gzipped if use_gzip and asset.gzipped is not None else asset.body, content_type=asset.content_type
        )
        if use_gzip:
            response["Content-Encoding"] = "gzip"
    response["ETag"] = etag
    response["Cache-Control"] = IMMUTABLE_CACHE if IMMUTABLE_PATH.match(path) else REVALIDATE_CACHE
    if asset.gzipped is not None:
        response["Vary"] = "Accept-Encoding"
    return response

"""The API's own reference pages: `/openapi.json`, the Scalar reference at `/` and Swagger UI at `/docs`.

Everything they need is served by this process, so the pages work offline and behind a gateway
that mounts the service under a path (`/jev/`): every URL on the pages and the schema's `servers`
entry are built per request from the script prefix (ASGI `root_path` or `FORCE_SCRIPT_NAME`).
Static files are served by `asset_view` (with DEBUG off too, without a separate web server), because
Django's `static()` caches `STATIC_URL` with whichever prefix was current on first use.
"""

from __future__ import annotations

import asyncio
import copy
import gzip
import hashlib
import json
import mimetypes
import os
import re
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.contrib.staticfiles import finders
from django.core.exceptions import SuspiciousFileOperation
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularSwaggerView
from rest_framework.request import Request
from rest_framework.response import Response

from evaluations.errors import ApiError, error_response

SCALAR_VERSION = "1.76.0"
SCALAR_JS = f"vendor/scalar/{SCALAR_VERSION}/standalone.js"
SWAGGER_DIST = "drf_spectacular_sidecar/swagger-ui-dist"

# Files under a versioned vendor folder never change at their URL; anything else may change on upgrade.
IMMUTABLE_PATH = re.compile(r"^vendor/[^/]+/\d[^/]*/")
IMMUTABLE_CACHE = "public, max-age=31536000, immutable"
REVALIDATE_CACHE = "public, max-age=3600"
COMPRESSIBLE = ("text/", "application/javascript", "application/json", "image/svg+xml")
GZIP_MIN_BYTES = 1024
SAFE_METHODS = ("GET", "HEAD")

# Scalar's options for an offline page: no web fonts, no telemetry, no links to Scalar's hosted services
# (developer tools, agent, client app); "Test Request" stays, so each example can be edited and sent.
SCALAR_OPTIONS: dict[str, Any] = {
    "withDefaultFonts": False,
    "telemetry": False,
    "showDeveloperTools": "never",
    "hideClientButton": True,
    "agent": {"disabled": True},
    "persistAuth": False,
    "defaultOpenAllTags": True,
    "documentDownloadType": "json",
    "modelsSectionLabel": "Schemas",
    "customCss": ":root { --scalar-font: system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif; "
                 "--scalar-font-code: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }",
}


# ---------------------------------------------------------------------------------------------------
# The schema: generated once per process, rendered once per server URL
# ---------------------------------------------------------------------------------------------------

_generate_lock = threading.Lock()


@lru_cache(maxsize=1)
def schema_document() -> dict[str, Any]:
    """The OpenAPI document without `servers`, generated from the views' annotations.

    Generation walks every URL pattern and serializer (tens of milliseconds), so it runs once per
    process; the result depends only on code and settings. Treat it as read-only.
    """
    with _generate_lock:
        document: dict[str, Any] = SchemaGenerator().get_schema(request=None, public=True)
    return document


@lru_cache(maxsize=8)
def schema_render(*, server_url: str = "/") -> bytes:
    """The document as served: JSON with one `servers` entry, the URL the operations are under."""
    document = copy.copy(schema_document())
    document["servers"] = [{"url": server_url, "description": "This server"}]
    return json.dumps(document, cls=DjangoJSONEncoder, ensure_ascii=False, indent=2).encode()


def server_url(request: HttpRequest) -> str:
    """The script prefix without its trailing slash (`/jev`), or `/` at the root."""
    prefix: str = request.META.get("SCRIPT_NAME") or ""
    return prefix.rstrip("/") or "/"


def _method_not_allowed(request: HttpRequest) -> HttpResponse | None:
    if request.method in SAFE_METHODS:
        return None
    response = error_response(ApiError(405, "method_not_allowed", f'Method "{request.method}" not allowed.'))
    response["Allow"] = ", ".join(SAFE_METHODS)
    return response


def _etag_matches(request: HttpRequest, etag: str) -> bool:
    header = request.headers.get("If-None-Match", "")
    return header.strip() == "*" or etag in (t.strip().removeprefix("W/") for t in header.split(","))


@csrf_exempt  # read-only; exempt so a wrong method gets our JSON 405, not CSRF's HTML 403
async def openapi_view(request: HttpRequest) -> HttpResponse:
    """`GET /openapi.json`: the document, with `servers` following the script prefix."""
    if (refused := _method_not_allowed(request)) is not None:
        return refused
    url = server_url(request)
    body = await asyncio.to_thread(schema_render, server_url=url)
    etag = f'"{hashlib.blake2b(body, digest_size=12).hexdigest()}"'
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if _etag_matches(request, etag):
        response = HttpResponse(status=304)
    else:
        response = HttpResponse(body, content_type="application/json")
    for name, value in headers.items():
        response[name] = value
    return response


# ---------------------------------------------------------------------------------------------------
# The pages
# ---------------------------------------------------------------------------------------------------


def asset_url(path: str) -> str:
    """A static file's URL under the current script prefix (resolved per request, never cached)."""
    return reverse("static-asset", kwargs={"path": path})


@csrf_exempt  # read-only; exempt so a wrong method gets our JSON 405, not CSRF's HTML 403
async def reference_view(request: HttpRequest) -> HttpResponse:
    """`GET /`: the interactive Scalar reference, every example editable and sendable ("Test Request")."""
    if (refused := _method_not_allowed(request)) is not None:
        return refused
    title = f"{settings.SPECTACULAR_SETTINGS.get('TITLE', 'API')} reference"
    context = {
        "title": title,
        "schema_url": reverse("openapi-json"),
        "swagger_url": reverse("swagger-ui"),
        "scalar_js": asset_url(SCALAR_JS),
        "scalar_config": {**SCALAR_OPTIONS, "url": reverse("openapi-json"), "metaData": {"title": title}},
    }
    return HttpResponse(render_to_string("reference/scalar.html", context, request=None),
                        content_type="text/html; charset=utf-8")


class SwaggerView(SpectacularSwaggerView):
    """`GET /docs`: drf-spectacular's Swagger UI page, its assets from the sidecar package via `asset_view`."""

    url_name = "openapi-json"
    title = "OpenJev API — Swagger UI"

    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response: Response = super().get(request, *args, **kwargs)
        assert isinstance(response.data, dict)
        response.data.update({
            "swagger_ui_css": asset_url(f"{SWAGGER_DIST}/swagger-ui.css"),
            "swagger_ui_bundle": asset_url(f"{SWAGGER_DIST}/swagger-ui-bundle.js"),
            "swagger_ui_standalone": asset_url(f"{SWAGGER_DIST}/swagger-ui-standalone-preset.js"),
            "favicon_href": asset_url(f"{SWAGGER_DIST}/favicon-32x32.png"),
        })
        return response


# ---------------------------------------------------------------------------------------------------
# Static files
# ---------------------------------------------------------------------------------------------------


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
    if (refused := _method_not_allowed(request)) is not None:
        return refused
    found = _find(path)
    if found is None:
        return error_response(ApiError(404, "not_found", f"no static file {path!r}"))
    stat = os.stat(found)
    stamp = (stat.st_mtime_ns, stat.st_size)
    asset = _assets.get(found)
    if asset is None or asset.stamp != stamp:
        asset = await asyncio.to_thread(_asset_load, found, stamp)
        _assets[found] = asset
    use_gzip = asset.gzipped is not None and _accepts_gzip(request)
    etag = f'"{asset.etag}{"-gz" if use_gzip else ""}"'
    if _etag_matches(request, etag):
        response = HttpResponse(status=304)
    else:
        response = HttpResponse(asset.gzipped if use_gzip and asset.gzipped is not None else asset.body,
                                content_type=asset.content_type)
        if use_gzip:
            response["Content-Encoding"] = "gzip"
    response["ETag"] = etag
    response["Cache-Control"] = IMMUTABLE_CACHE if IMMUTABLE_PATH.match(path) else REVALIDATE_CACHE
    if asset.gzipped is not None:
        response["Vary"] = "Accept-Encoding"
    return response


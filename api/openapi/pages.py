"""The API's own reference pages: `/openapi.json`, the Scalar reference at `/` and Swagger UI at `/docs`.

Everything they need is served by this process, so the pages work offline and behind a gateway
that mounts the service under a path (`/jev/`): every URL on the pages and the schema's `servers`
entry are built per request from the script prefix (ASGI `root_path` or `FORCE_SCRIPT_NAME`).
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularSwaggerView
from rest_framework.request import Request
from rest_framework.response import Response

from api.openapi.document import schema_render
from api.plumbing.assets import asset_url, etag_matches, method_refused

SCALAR_VERSION = "1.76.0"
SCALAR_JS = f"vendor/scalar/{SCALAR_VERSION}/standalone.js"
SWAGGER_DIST = "drf_spectacular_sidecar/swagger-ui-dist"

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


def server_url(request: HttpRequest) -> str:
    """The script prefix without its trailing slash (`/jev`), or `/` at the root."""
    prefix: str = request.META.get("SCRIPT_NAME") or ""
    return prefix.rstrip("/") or "/"


@csrf_exempt  # read-only; exempt so a wrong method gets our JSON 405, not CSRF's HTML 403
async def openapi_view(request: HttpRequest) -> HttpResponse:
    """`GET /openapi.json`: the document, with `servers` following the script prefix."""
    if (refused := method_refused(request)) is not None:
        return refused
    url = server_url(request)
    body = await asyncio.to_thread(schema_render, server_url=url)
    etag = f'"{hashlib.blake2b(body, digest_size=12).hexdigest()}"'
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if etag_matches(request, etag):
        response = HttpResponse(status=304)
    else:
        response = HttpResponse(body, content_type="application/json")
    for name, value in headers.items():
        response[name] = value
    return response


@csrf_exempt  # read-only; exempt so a wrong method gets our JSON 405, not CSRF's HTML 403
async def reference_view(request: HttpRequest) -> HttpResponse:
    """`GET /`: the interactive Scalar reference, every example editable and sendable ("Test Request")."""
    if (refused := method_refused(request)) is not None:
        return refused
    title = f"{settings.SPECTACULAR_SETTINGS.get('TITLE', 'API')} reference"
    context = {
        "title": title,
        "schema_url": reverse("openapi-json"),
        "swagger_url": reverse("swagger-ui"),
        "scalar_js": asset_url(SCALAR_JS),
        "scalar_config": {**SCALAR_OPTIONS, "url": reverse("openapi-json"), "metaData": {"title": title}},
    }
    return HttpResponse(
        render_to_string("reference/scalar.html", context, request=None), content_type="text/html; charset=utf-8"
    )


class SwaggerView(SpectacularSwaggerView):
    """`GET /docs`: drf-spectacular's Swagger UI page, its assets from the sidecar package via `asset_view`."""

    url_name = "openapi-json"
    title = "OpenJev API — Swagger UI"

    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response: Response = super().get(request, *args, **kwargs)
        assert isinstance(response.data, dict)
        response.data.update(
            {
                "swagger_ui_css": asset_url(f"{SWAGGER_DIST}/swagger-ui.css"),
                "swagger_ui_bundle": asset_url(f"{SWAGGER_DIST}/swagger-ui-bundle.js"),
                "swagger_ui_standalone": asset_url(f"{SWAGGER_DIST}/swagger-ui-standalone-preset.js"),
                "favicon_href": asset_url(f"{SWAGGER_DIST}/favicon-32x32.png"),
            }
        )
        return response

"""The reference pages and their static files without a browser: offline by construction, served with
DEBUG off, cache headers, and every URL following a gateway's path prefix."""

from __future__ import annotations

import gzip
import hashlib
import json
import re

import httpx
import pytest
from django.conf import settings as django_settings

from api.openapi.pages import SCALAR_JS, SCALAR_VERSION, SWAGGER_DIST
from serving.config import BASE_DIR
from serving.config_reading import config_from_env
from serving.setting_rules import ConfigError
from tests.conftest import README_REQUEST
from tests.docs.conftest import openapi

SCALAR_URL = f"/static/{SCALAR_JS}"
SWAGGER_ASSETS = ("swagger-ui.css", "swagger-ui-bundle.js", "swagger-ui-standalone-preset.js", "favicon-32x32.png")
EXTERNAL_URL = re.compile(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//|@import|fonts\.""", re.I)


def _scalar_config(html: str) -> dict:
    match = re.search(r'<script id="scalar-config" type="application/json">(.*?)</script>', html, re.S)
    assert match, html
    config: dict = json.loads(match.group(1))
    return config


async def test_the_scalar_page_loads_only_the_vendored_bundle_and_the_schema(api):
    response = await api.get("/")
    assert response.status_code == 200 and response.headers["content-type"] == "text/html; charset=utf-8"
    html = response.text
    assert re.findall(r'<script src="([^"]+)"', html) == [SCALAR_URL]
    assert not EXTERNAL_URL.search(html)
    config = _scalar_config(html)
    assert config["url"] == "/openapi.json"
    assert config["withDefaultFonts"] is False and config["telemetry"] is False
    assert config["showDeveloperTools"] == "never" and config["agent"] == {"disabled": True}
    assert "proxyUrl" not in config  # requests go straight to this server, never through Scalar's proxy
    # The auto-mount element id of the standalone bundle must not be used: it would mount a second,
    # unconfigured instance that loads web fonts.
    assert 'id="api-reference"' not in html


async def test_swagger_ui_loads_only_sidecar_assets_and_the_schema(api):
    response = await api.get("/docs")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    html = response.text
    for asset in SWAGGER_ASSETS:
        assert f"/static/{SWAGGER_DIST}/{asset}" in html
    assert '"/openapi.json"' in html
    assert '"validatorUrl": null' in html
    assert not EXTERNAL_URL.search(html)


async def test_the_vendored_bundle_is_served_with_debug_off_compressed_and_cacheable_for_a_year(api):
    assert django_settings.DEBUG is False
    raw = (BASE_DIR / "static" / SCALAR_JS).read_bytes()
    plain = await api.get(SCALAR_URL, headers={"Accept-Encoding": "identity"})
    assert plain.status_code == 200 and plain.content == raw
    assert plain.headers["content-type"] == "text/javascript; charset=utf-8"
    assert plain.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert "content-encoding" not in plain.headers

    async with httpx.AsyncClient(transport=api._transport, base_url="http://testserver") as client:
        request = client.build_request("GET", SCALAR_URL, headers={"Accept-Encoding": "gzip"})
        zipped = await client.send(request, stream=True)
        body = b"".join([chunk async for chunk in zipped.aiter_raw()])
    assert zipped.headers["content-encoding"] == "gzip" and zipped.headers["vary"] == "Accept-Encoding"
    assert len(body) < len(raw) / 3 and gzip.decompress(body) == raw
    assert zipped.headers["etag"] != plain.headers["etag"]

    revalidated = await api.get(
        SCALAR_URL, headers={"If-None-Match": plain.headers["etag"], "Accept-Encoding": "identity"}
    )
    assert revalidated.status_code == 304 and revalidated.content == b""


async def test_sidecar_and_admin_assets_are_served_but_revalidated_hourly(api):
    for path in (f"/static/{SWAGGER_DIST}/swagger-ui.css", "/static/admin/css/base.css"):
        response = await api.get(path)
        assert response.status_code == 200, path
        assert response.headers["cache-control"] == "public, max-age=3600"
        assert response.headers["content-type"] == "text/css; charset=utf-8"
    icon = await api.get(f"/static/{SWAGGER_DIST}/favicon-32x32.png")
    assert icon.headers["content-type"] == "image/png" and "vary" not in icon.headers


@pytest.mark.parametrize(
    "path",
    [
        "/static/%2e%2e/openjev_site/settings.py",
        "/static/..%2fmanage.py",
        "/static/vendor/../../manage.py",
        "/static/vendor/.hidden",
        "/static/vendor/",
        "/static/nope.js",
        "/static/vendor",
    ],
)
async def test_static_never_escapes_the_static_folders_and_misses_are_json_404(api, path):
    response = await api.get(path)
    assert response.status_code == 404, path
    assert response.json()["detail"]["error_type"] == "not_found"


async def test_pages_refuse_writes_with_a_json_405(api):
    for path in ("/", "/docs", SCALAR_URL):
        response = await api.post(path, json={})
        assert response.status_code == 405, path
        assert response.json()["detail"]["error_type"] == "method_not_allowed"


def test_each_vendored_package_has_its_licence_and_is_listed_with_its_checksum():
    vendor = BASE_DIR / "static" / "vendor"
    readme = (vendor / "README.md").read_text()
    bundle = vendor / "scalar" / SCALAR_VERSION / "standalone.js"
    assert (bundle.parent / "LICENSE").read_text().startswith("MIT License")
    assert f"@scalar/api-reference@{SCALAR_VERSION}" in readme
    assert hashlib.sha256(bundle.read_bytes()).hexdigest() in readme
    assert [p.name for p in (vendor / "scalar").iterdir()] == [SCALAR_VERSION]  # one version, no leftovers


# ---------------------------------------------------------------------------------------------------
# Behind a path prefix
# ---------------------------------------------------------------------------------------------------


@pytest.fixture
async def prefixed(evaluator):
    """The app as a gateway that forwards /jev/... and sets the ASGI root_path would call it."""
    from openjev_site.asgi import application

    transport = httpx.ASGITransport(app=application, root_path="/jev")
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        yield client


async def _assert_everything_under(client: httpx.AsyncClient, prefix: str) -> None:
    document = await openapi(client, f"{prefix}/openapi.json")
    assert document["servers"][0]["url"] == prefix
    html = (await client.get(f"{prefix}/")).text
    assert re.findall(r'<script src="([^"]+)"', html) == [prefix + SCALAR_URL]
    assert _scalar_config(html)["url"] == f"{prefix}/openapi.json"
    docs = (await client.get(f"{prefix}/docs")).text
    assert f'"{prefix}/openapi.json"' in docs
    assert all(f"{prefix}/static/{SWAGGER_DIST}/{asset}" in docs for asset in SWAGGER_ASSETS)
    assert (await client.get(prefix + SCALAR_URL)).status_code == 200
    evaluated = await client.post(f"{prefix}/v1/systemone", json=README_REQUEST)
    assert evaluated.status_code == 200, evaluated.text
    assert (await client.get(f"{prefix}/v1/models")).status_code == 200


async def test_everything_follows_the_asgi_root_path(prefixed):
    await _assert_everything_under(prefixed, "/jev")


async def test_everything_follows_force_script_name(api, settings):
    settings.FORCE_SCRIPT_NAME = "/jev"
    await _assert_everything_under(api, "/jev")
    # The unprefixed schema now says /jev too: the prefix comes from the setting, not the request path.
    assert (await openapi(api))["servers"][0]["url"] == "/jev"


async def test_prefixes_do_not_leak_between_requests(api, prefixed):
    assert (await openapi(prefixed, "/jev/openapi.json"))["servers"][0]["url"] == "/jev"
    assert (await openapi(api))["servers"][0]["url"] == "/"
    assert _scalar_config((await api.get("/")).text)["url"] == "/openapi.json"


def test_openjev_force_script_name_is_validated():
    assert config_from_env({"OPENJEV_FORCE_SCRIPT_NAME": "/jev/"}).force_script_name == "/jev"
    assert config_from_env({"OPENJEV_FORCE_SCRIPT_NAME": "/"}).force_script_name is None
    assert config_from_env({}).force_script_name is None
    with pytest.raises(ConfigError, match="OPENJEV_FORCE_SCRIPT_NAME"):
        config_from_env({"OPENJEV_FORCE_SCRIPT_NAME": "jev"})

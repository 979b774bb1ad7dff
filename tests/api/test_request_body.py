"""The body reader in front of the API: what reaches a view is the whole body, decoded, within its limit
and its deadline; everything else is a 4xx in the route's shape before any view runs."""

from __future__ import annotations

import asyncio
import gzip
import json

import pytest
import zstandard

from tests.api.helpers import assert_error, body_with
from tests.conftest import README_REQUEST


@pytest.mark.parametrize(
    "raw, position",
    [
        (b'{"model": "jev-latest", "state": "x", "questions": {', 52),
        (b"\xff\xfe{}", 0),
        (b"", 0),
        (b'{"model": NaN}', 0),
        (b'{"a": 1} x', 9),
    ],
)
async def test_body_that_is_not_json_or_not_utf8_gets_422_json_invalid_at_its_position(api, fake, raw, position):
    """FastAPI's shape, which the jevcompat suite expects: `loc` is `["body", <where it breaks>]`."""
    response = await api.post("/v1/systemone", content=raw, headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    (problem,) = response.json()["detail"]
    assert problem["loc"] == ["body", position] and problem["type"] == "json_invalid"
    assert problem["msg"].startswith("the body is not")
    assert fake.requests == []


async def test_gzip_and_zstd_bodies_are_decoded(api, fake):
    raw = json.dumps(README_REQUEST).encode()
    for encoding, data in (("gzip", gzip.compress(raw)), ("zstd", zstandard.ZstdCompressor().compress(raw))):
        response = await api.post(
            "/v1/systemone", content=data, headers={"Content-Type": "application/json", "Content-Encoding": encoding}
        )
        assert response.status_code == 200, (encoding, response.text)


async def test_unsupported_content_encoding_gets_415(api, fake):
    response = await api.post("/v1/systemone", content=b"{}", headers={"Content-Encoding": "br"})
    assert_error(response, 415, "unsupported_media_type")


@pytest.mark.parametrize("encoding", ["gzip", "zstd"])
async def test_corrupt_or_truncated_compressed_body_gets_400(api, fake, encoding):
    raw = json.dumps(README_REQUEST).encode()
    data = gzip.compress(raw) if encoding == "gzip" else zstandard.ZstdCompressor().compress(raw)
    for broken in (data[: len(data) // 2], b"not compressed at all"):
        response = await api.post("/v1/systemone", content=broken, headers={"Content-Encoding": encoding})
        assert_error(response, 400, "invalid_request")


async def test_body_over_the_limit_gets_413(api, fake):
    big = body_with(state="x" * (2 * 1024 * 1024 + 10))
    response = await api.post("/v1/systemone", json=big)
    assert_error(response, 413, "request_too_large")
    assert fake.requests == []


@pytest.mark.parametrize("encoding", ["gzip", "zstd"])
async def test_compression_bomb_gets_413(api, fake, encoding):
    bomb_raw = b'{"state": "' + b"a" * (50 * 1024 * 1024) + b'"}'
    bomb = gzip.compress(bomb_raw) if encoding == "gzip" else zstandard.ZstdCompressor().compress(bomb_raw)
    assert len(bomb) < 2 * 1024 * 1024
    response = await api.post("/v1/systemone", content=bomb, headers={"Content-Encoding": encoding})
    assert_error(response, 413, "request_too_large")


async def guard_refusal(scope, receive, *, read_timeout=5.0):
    """What the body reader alone (10 KiB limit) sends for `scope`, in front of an app that must not run."""
    from api.plumbing.request_body import RequestBodyReader

    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    async def app(scope, receive, send):
        raise AssertionError("the app must not run")

    await RequestBodyReader(app, max_bytes=10 * 1024, read_timeout=read_timeout)(scope, receive, send)
    return sent


class EndlessBody:
    """A client that streams 1 KiB chunks for ever; counts what the guard read."""

    def __init__(self):
        self.read = 0

    async def __call__(self):
        self.read += 1
        return {"type": "http.request", "body": b"x" * 1024, "more_body": True}


@pytest.mark.parametrize("method", ["POST", "GET", "DELETE", "HEAD", "OPTIONS", "PUT", "PATCH"])
async def test_a_body_over_the_limit_is_refused_on_every_method_before_it_is_all_read(method):
    body = EndlessBody()
    declared = {"type": "http", "method": method, "path": "/v1/models", "headers": [(b"content-length", b"99999")]}
    assert (await guard_refusal(declared, body))[0]["status"] == 413
    assert body.read == 0  # refused on the declared length alone
    streamed = {"type": "http", "method": method, "path": "/v1/models", "headers": []}
    assert (await guard_refusal(streamed, body))[0]["status"] == 413
    assert body.read == 11


async def test_a_get_with_a_body_is_limited_like_a_post(api, fake):
    response = await api.request("GET", "/v1/models", content=b"x" * (2 * 1024 * 1024 + 1))
    assert_error(response, 413, "request_too_large")
    assert (await api.request("GET", "/v1/models", content=b"small")).status_code == 200


async def test_a_body_that_stalls_gets_408_and_the_connection_closed():
    chunks = [{"type": "http.request", "body": b'{"model":', "more_body": True}]

    async def receive():
        if chunks:
            return chunks.pop()
        await asyncio.sleep(3600)  # the client stopped sending

    scope = {"type": "http", "method": "POST", "path": "/v1/systemone", "headers": []}
    sent = await asyncio.wait_for(guard_refusal(scope, receive, read_timeout=0.2), timeout=5)
    assert sent[0]["status"] == 408 and (b"connection", b"close") in sent[0]["headers"]
    assert json.loads(sent[1]["body"])["detail"]["error_type"] == "request_timeout"

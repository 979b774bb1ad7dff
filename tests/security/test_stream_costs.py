"""What a stream socket may cost before it is refused: nothing is parsed before the key is known or over the key's
request limit, and a message costs what was sent (no per-message compression). Through uvicorn as `serve` runs it,
with a real `websockets` client."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from websockets.asyncio.client import connect

from api.systemone import stream_protocol
from tests.conftest import README_REQUEST
from tests.security.test_sockets import KEY, bearer, closed_with, ws_url

ARRAYS = json.dumps({"id": 1, **README_REQUEST, "state": [[]] * 500_000})
"""The review's message: 500,000 empty arrays (two megabytes of JSON, 2 KB once deflated)."""


@pytest.fixture
def parsed(monkeypatch) -> list[int]:
    """The sizes of the messages the stream parses, from now on."""
    sizes: list[int] = []
    parse = stream_protocol.body_parse

    def counted(raw: bytes):
        sizes.append(len(raw))
        return parse(raw)

    monkeypatch.setattr(stream_protocol, "body_parse", counted)
    return sizes


async def test_with_no_key_a_large_message_is_refused_unparsed(served, settings, parsed):
    settings.OPENJEV = replace(settings.OPENJEV, api_key=KEY)
    async with connect(ws_url(served), max_size=None) as ws:
        await ws.send(ARRAYS)
        code, reason = await closed_with(ws)
    assert code == 4401 and "authenticate first" in reason
    assert parsed == []


async def test_a_key_over_its_request_limit_is_refused_before_its_message_is_parsed(served, settings, parsed):
    settings.OPENJEV = replace(settings.OPENJEV, api_key=KEY, key_requests_per_minute=1)
    async with connect(ws_url(served), additional_headers=bearer(KEY), max_size=None) as ws:
        await ws.send(json.dumps({"id": 1, **README_REQUEST, "state": "x" * 2_000}))
        while (first := json.loads(await ws.recv()))["type"] not in ("done", "error"):
            pass
        for _ in range(3):
            await ws.send(ARRAYS)
            refused = json.loads(await ws.recv())
            assert refused["type"] == "error" and refused["status"] == 429, refused
    assert first["type"] == "done"
    assert len(parsed) == 1, "only the message admitted under the key's limit was parsed"


async def test_a_message_over_the_body_limit_is_refused_before_admission_and_parsing(served, settings, parsed):
    settings.OPENJEV = replace(settings.OPENJEV, api_key=KEY, max_body_bytes=4_096, key_requests_per_minute=1)
    async with connect(ws_url(served), additional_headers=bearer(KEY), max_size=None) as ws:
        for _ in range(2):
            await ws.send(json.dumps({"id": 1, **README_REQUEST, "state": "x" * 5_000}))
            refused = json.loads(await ws.recv())
            assert refused["status"] == 413, refused
        await ws.send(json.dumps({"id": 2, **README_REQUEST}))  # the limit of one request a minute is still unspent
        while (answer := json.loads(await ws.recv()))["type"] not in ("done", "error"):
            pass
    assert answer["type"] == "done" and len(parsed) == 1


async def test_the_server_takes_no_per_message_compression(served):
    """A client offers permessage-deflate by default; the server declines, so a message costs what was sent."""
    async with connect(ws_url(served)) as ws:
        assert ws.protocol.extensions == []

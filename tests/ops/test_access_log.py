"""Keys a client puts in a URL or a header never reach the log: `manage.py serve --access-log` for real, under
each server, then the line rewriting itself."""

from __future__ import annotations

import json

import httpx
import pytest
from websockets.asyncio.client import connect

from serving.access_log import log_line_redact
from tests.conftest import README_REQUEST
from tests.ops.helpers import Serve

pytestmark = pytest.mark.servers

QUERY_KEY = "oj_querykey_0123456789abcdef"
STREAM_KEY = "oj_streamkey_0123456789abcdef"
HEADER_KEY = "oj_headerkey_0123456789abcdef"


@pytest.mark.parametrize("server", ["uvicorn", "daphne"])
async def test_the_access_log_keeps_each_line_without_query_strings_or_keys(fake, tmp_path, server):
    with Serve(["--connect", fake.url, "--server", server, "--access-log"], log=tmp_path / "serve.log") as serve:
        serve.wait_healthy()
        async with httpx.AsyncClient(base_url=serve.url) as client:
            models = await client.get(
                f"/v1/models?api_key={QUERY_KEY}", headers={"Authorization": f"Bearer {HEADER_KEY}"}
            )
            assert models.status_code == 200
        stream = serve.url.replace("http://", "ws://") + f"/v1/systemone/stream?api_key={STREAM_KEY}"
        async with connect(stream, additional_headers={"Authorization": f"Bearer {HEADER_KEY}"}) as ws:
            await ws.send(json.dumps({"id": 1, **README_REQUEST}))
            while json.loads(await ws.recv())["type"] != "done":
                pass
        assert serve.terminate() == 0, serve.log
    log = serve.log
    assert "/v1/models?***" in log  # the line is kept, its query string is not
    assert "/v1/systemone/stream" in log
    for key in (QUERY_KEY, STREAM_KEY, HEADER_KEY):
        assert key not in log, key


@pytest.mark.parametrize(
    ("line", "redacted"),
    [
        ('127.0.0.1:5 - "GET /v1/models?api_key=k1 HTTP/1.1" 200', '127.0.0.1:5 - "GET /v1/models?*** HTTP/1.1" 200'),
        (
            '127.0.0.1:5 - "WebSocket /v1/systemone/stream?api_key=k2&x=1" [accepted]',
            '127.0.0.1:5 - "WebSocket /v1/systemone/stream?***" [accepted]',
        ),
        (
            'WebSocket HANDSHAKING /jev/v1/systemone/stream?a"key=k3 [127.0.0.1:4]',
            "WebSocket HANDSHAKING /jev/v1/systemone/stream?*** [127.0.0.1:4]",
        ),
        ("backend http://sglang:30000/generate?token=k4 failed", "backend http://sglang:30000/generate?*** failed"),
        (
            '{"Authorization": "Bearer oj_abc_k5", "authorization": "k6"}',
            '{"Authorization": "Bearer ***", "authorization": "***"}',
        ),
        ("Authorization: Basic dXNlcjprNw==", "Authorization: Basic ***"),
        ("is the backend ready? not yet", "is the backend ready? not yet"),
    ],
)
def test_query_strings_and_credentials_are_replaced_and_the_rest_of_the_line_kept(line, redacted):
    assert log_line_redact(line=line) == redacted

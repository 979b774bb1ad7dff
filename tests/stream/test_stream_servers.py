"""The stream under `manage.py serve` for real, with each supported ASGI server: uvicorn (the default) and
daphne, whose own message size limit (1 MiB by default) `serve` raises above the body limit."""

from __future__ import annotations

import pytest
from websockets.asyncio.client import connect

from tests.conftest import README_REQUEST
from tests.ops.helpers import Serve
from tests.stream.conftest import of, receive, send, until_ended

pytestmark = pytest.mark.servers

BODY_LIMIT = 2 * 1024 * 1024


@pytest.mark.parametrize("server", ["uvicorn", "daphne"])
async def test_serve_streams_answers_and_takes_messages_up_to_the_body_limit(fake, tmp_path, server):
    with Serve(["--connect", fake.url, "--server", server], log=tmp_path / "serve.log") as serve:
        serve.wait_healthy()
        async with connect(serve.url.replace("http://", "ws://") + "/v1/systemone/stream", max_size=None) as ws:
            await send(ws, {"id": "plain", **README_REQUEST})
            messages = await until_ended(ws, ["plain"])
            assert [m["type"] for m in messages] == ["answer"] * 3 + ["done"]
            # Over daphne's default frame and message limits, under the body limit: answered.
            await send(ws, {"id": "large", **README_REQUEST, "padding": "x" * (BODY_LIMIT - 100_000)})
            assert of(await until_ended(ws, ["large"]), "large", "done")
            await send(ws, {"id": "too-large", **README_REQUEST, "padding": "x" * BODY_LIMIT})
            refused = await receive(ws)
            assert (refused["id"], refused["status"]) == (None, 413)
            await send(ws, {"id": "after", **README_REQUEST})
            assert of(await until_ended(ws, ["after"]), "after", "done")

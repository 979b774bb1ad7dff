"""docs/streaming.md's Python client, run as written (in its own process) against the app served on loopback."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from serving.config import BASE_DIR
from testbed.live_server import LiveServer


def python_example() -> str:
    text = (BASE_DIR / "docs" / "streaming.md").read_text()
    (code,) = [block for block in re.findall(r"```python\n(.*?)```", text, re.S) if "websockets" in block]
    return code


def test_the_documented_stream_client_runs_as_written(asgi_server: LiveServer) -> None:
    env = {**os.environ, "OPENJEV_STREAM_URL": asgi_server.url.replace("http://", "ws://") + "/v1/systemone/stream"}
    env.pop("OPENJEV_API_KEY", None)
    result = subprocess.run(
        [sys.executable, "-c", python_example()], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert sorted(line.split()[0] for line in lines if " done " in line) == ["0", "1", "2"]
    assert len([line for line in lines if " refund " in line or " team " in line]) == 6

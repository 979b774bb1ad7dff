"""The real ASGI app under uvicorn on loopback, for clients that need a socket (SDK, jevcompat, benchmarks)."""

from __future__ import annotations

import threading
import time
from typing import Any

import uvicorn

from testbed.ports import free_port


class LiveServer:
    """`app` (the site's application by default) served in a daemon thread until the `with` block ends."""

    def __init__(self, app: Any | None = None) -> None:
        from openjev_site.asgi import application

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # No proxy headers, as `serve` runs it: the application resolves the client (serving.addresses).
        config = uvicorn.Config(
            app or application,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="off",
            proxy_headers=False,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("live server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

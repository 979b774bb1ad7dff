"""An ASGI app served by uvicorn on its own event loop in a daemon thread, on loopback: started and
stopped from a test's thread, and able to die like a crashed process and come back on the same port."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Self

import uvicorn

from fake_sglang.http import ASGIReceive, ASGISend, loop_new, other_tasks_cancel, socket_bind


class ThreadedServer:
    """Subclasses are the ASGI app (`__call__`); `on_kill` wakes their in-flight handlers."""

    def __init__(self, *, host: str, port: int, keep_alive_s: float, name: str) -> None:
        self.host = host
        self.port = port
        self.keep_alive_s = keep_alive_s
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._uvicorn: uvicorn.Server | None = None
        self._serve_task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def listening(self) -> bool:
        return self._uvicorn is not None

    def start(self) -> Self:
        """Bind (port 0 = ephemeral) and serve in a daemon thread; returns once connections are accepted."""
        if self._thread is None:
            self._loop = loop_new()
            self._thread = threading.Thread(target=self._loop.run_forever, name=self._name, daemon=True)
            self._thread.start()
        self._run(self._listen())
        return self

    def dead(self) -> None:
        """Die like a crashed server: stop listening and reset open connections (new ones are refused)."""
        if self._uvicorn is not None:
            self._run(self._kill())

    def revive(self) -> None:
        """Listen again on the same port after :meth:`dead`, keeping whatever the subclass keeps."""
        self.start()

    def stop(self) -> None:
        """Kill the server and its thread; safe to call twice."""
        if self._loop is None or self._thread is None:
            return
        self.dead()
        self._run(other_tasks_cancel())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()
        self._loop, self._thread = None, None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __call__(self, scope: dict[str, Any], receive: ASGIReceive, send: ASGISend) -> None:
        """The ASGI app: subclasses answer the requests."""
        raise NotImplementedError

    def on_kill(self) -> None:
        """Called on the server loop when it dies: wake in-flight handlers (they write into closed sockets)."""

    def _run(self, coro: Awaitable[Any], timeout: float = 15.0) -> Any:
        assert self._loop is not None, "the server is not started"
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)  # type: ignore[arg-type]

    def _on_loop(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the server loop (or right here when it is not running) to avoid racing handlers."""
        if self._loop is None or not self._loop.is_running():
            fn()
            return

        async def call() -> None:
            fn()

        self._run(call())

    async def _listen(self) -> None:
        if self._uvicorn is not None:
            return
        sock = socket_bind(self.host, self.port)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            http="h11",
            proxy_headers=False,
            timeout_keep_alive=int(self.keep_alive_s),
            backlog=4096,
        )
        server = uvicorn.Server(config)
        self._uvicorn = server
        self._serve_task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
        while not server.started:
            if self._serve_task.done():
                self._uvicorn = None
                self._serve_task.result()
                raise RuntimeError(f"{self._name} exited during startup")
            await asyncio.sleep(0.002)

    async def _kill(self) -> None:
        server, task = self._uvicorn, self._serve_task
        assert server is not None and task is not None
        server.should_exit = server.force_exit = True
        for listener in getattr(server, "servers", []):
            listener.close()
        for connection in list(server.server_state.connections):
            transport = getattr(connection, "transport", None)
            if transport is not None:
                transport.abort()
        self.on_kill()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, timeout=5)
        self._uvicorn, self._serve_task = None, None

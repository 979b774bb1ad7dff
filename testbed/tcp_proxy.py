"""A TCP proxy in a process of its own, for putting a database behind a connection that can be frozen or cut
(`bench/faults.py`, `tests/gateway/test_faults.py`).

`python -m testbed.tcp_proxy --port P --upstream HOST:PORT` forwards every connection to the upstream, byte for
byte. `TcpProxy` runs it and breaks it the ways a network or a host does:

- `freeze`: SIGSTOP. The kernel still completes new connections (into the listen backlog) and acknowledges what
  is sent on open ones, but nothing is forwarded and nothing comes back: a database that stopped answering,
  seen from its clients. `thaw` (SIGCONT) lets everything through again, late.
- `kill`: SIGKILL. Every open connection is cut and a new one is refused: a database gone. `start` again on the
  same port brings it back.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHUNK = 64 * 1024


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            writer.close()


async def _serve(*, port: int, upstream_host: str, upstream_port: int) -> None:
    async def forward(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection(upstream_host, upstream_port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(_pipe(client_reader, server_writer), _pipe(server_reader, client_writer))

    server = await asyncio.start_server(forward, "127.0.0.1", port, reuse_address=True, backlog=128)
    print("listening", flush=True)
    async with server:
        await server.serve_forever()


class TcpProxy:
    """The proxy's process: started, frozen and thawed, killed and started again on the same port."""

    def __init__(self, *, port: int, upstream: str, log_path: Path) -> None:
        self.port = port
        self.upstream = upstream
        self._log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start it and return once it accepts connections."""
        with self._log_path.open("ab") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "testbed.tcp_proxy", "--port", str(self.port), "--upstream", self.upstream],
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return
            if self._process.poll() is not None:
                raise RuntimeError(f"the TCP proxy exited with {self._process.returncode}")
            time.sleep(0.05)
        raise RuntimeError(f"the TCP proxy on port {self.port} did not start")

    def freeze(self) -> None:
        assert self._process is not None
        os.kill(self._process.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        assert self._process is not None
        os.kill(self._process.pid, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL (a stopped process too) and wait for it: its port is free again."""
        if self._process is None or self._process.poll() is not None:
            return
        self._process.kill()
        self._process.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True, help="the loopback port to listen on")
    parser.add_argument("--upstream", required=True, help="HOST:PORT to forward every connection to")
    args = parser.parse_args()
    host, _, port = args.upstream.rpartition(":")
    asyncio.run(_serve(port=args.port, upstream_host=host, upstream_port=int(port)))


if __name__ == "__main__":
    main()

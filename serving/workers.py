"""`serve --workers N`: N API processes on one port, started and stopped together.

One Python process tops out at one core: the event loop, the tokenizer calls and the storage writer
share the GIL. Each worker is a whole `serve` of its own (its evaluator, admission limit, connection
pool and storage writer) listening on the same port with SO_REUSEPORT, so the kernel spreads new
connections over the workers by their addresses, evenly, where one shared listening socket lets
whichever worker wakes first take a burst of them.

The parent supervises: SIGTERM or SIGINT stop every worker (each drains its own requests); a worker
that exits on its own is reported and stops the rest, so a replica never serves at part capacity
without saying so. No Django here.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from serving.supervisor import (
    parent_death_signal,
    process_group_stop,
    process_launch,
    process_watch,
    returncode_describe,
    signal_group,
)

log = logging.getLogger("openjev.serve")


def workers_count(*, requested: int) -> int:
    """`0` means one worker per core."""
    return requested if requested > 0 else (os.cpu_count() or 1)


def reuse_port_socket(*, host: str, port: int) -> socket.socket:
    """A TCP socket bound to `host:port` with SO_REUSEPORT, so every worker binds its own on one port
    (the server puts it in listening state)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


@dataclass
class WorkerPool:
    """`count` copies of `argv` (a worker's `serve` command line) under one supervisor."""

    argv: Sequence[str]
    count: int
    grace: float
    """Seconds a worker gets after SIGTERM (its drain) before SIGKILL."""
    stopped: threading.Event = field(default_factory=threading.Event)
    failed: list[int] = field(default_factory=list)
    """The status of the first worker that exited on its own."""
    _workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def run(self) -> None:
        """Start the workers and wait until `stop` is called or one of them exits."""
        for _ in range(self.count):
            worker = process_launch(argv=self.argv, preexec=parent_death_signal())
            self._workers.append(worker)
            process_watch(
                process=worker, on_exit=functools.partial(self._exited, worker.pid), name=f"worker-watch-{worker.pid}"
            )
        log.info("started %d API workers: pids %s", self.count, ", ".join(str(w.pid) for w in self._workers))
        self.stopped.wait()
        for worker in self._workers:  # all at once: they drain side by side
            signal_group(worker.pid, signal.SIGTERM)
        for worker in self._workers:
            process_group_stop(process=worker, grace=self.grace)

    def stop(self) -> None:
        self.stopped.set()

    def _exited(self, pid: int, returncode: int) -> None:
        if self.stopped.is_set():
            return
        self.failed.append(returncode)
        log.error(
            "API worker %d exited with %s: stopping the other workers", pid, returncode_describe(returncode=returncode)
        )
        self.stopped.set()

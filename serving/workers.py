"""`serve --workers N`: N API processes on one port, a dead one replaced while the others serve.

One Python process tops out at one core: the event loop, the tokenizer calls and the storage writer
share the GIL. Each worker is a whole `serve` of its own (its evaluator, admission limit, connection
pool and storage writer) listening on the same port with SO_REUSEPORT, so the kernel spreads new
connections over the workers by their addresses, evenly, where one shared listening socket lets
whichever worker wakes first take a burst of them.

The parent supervises. A worker that exits without being asked to (the OOM killer's SIGKILL, a crash,
even a clean exit) is replaced by a fresh one while the others go on serving: the kernel routes new
connections only to sockets still listening, so a replica that lost a worker answers at part capacity
for the seconds a replacement takes to start, where stopping the whole replica refused every connection
until its container came back (184 of 184 requests over 20 s in a fault run). Only a crash loop stops
it: a replacement waits `RestartPolicy.backoff_first` seconds, doubled for each further death of its
slot within the window, so a worker that dies as it starts does not spin, and more than
`RestartPolicy.deaths_max` deaths within `RestartPolicy.window` seconds is no passing accident (a broken
host, a port taken, memory too small for N engines): the pool stops the others and `serve` exits
non-zero with the last dead worker's status, so a restart policy or an operator sees it.

SIGTERM or SIGINT stop every worker (each drains its own requests); a worker that exits while the pool
stops is not replaced.

The pool writes how many workers are configured, up and replaced to a small JSON file, rewritten
atomically on each change, and names it to its workers in `OPENJEV_WORKERS_STATE` (serve's own channel,
not an operator setting): `/health` reads a few bytes per request, with no lock and no message to wait
on, and a metrics exporter can read the same file. The workers write their metrics to files in the same
directory (`serving.metrics`), and a dead worker's live gauges are dropped from them when it is reaped. No
Django here.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from serving.metrics import MULTIPROCESS_ENV, metrics_process_dead
from serving.supervisor import (
    parent_death_signal,
    process_group_stop,
    process_launch,
    returncode_describe,
    signal_group,
)

log = logging.getLogger("openjev.serve")

WORKERS_STATE_ENV = "OPENJEV_WORKERS_STATE"
"""The path of the pool's state file, in each worker's environment."""
POLL_SECONDS = 0.1
"""How often the pool looks for dead workers and due replacements."""


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


@dataclass(frozen=True, kw_only=True)
class RestartPolicy:
    """When a dead worker is replaced, and when the pool gives up instead."""

    backoff_first: float = 0.5
    """Seconds before a slot's replacement after its first death within `window`."""
    backoff_max: float = 10.0
    """The longest wait, however often the slot died."""
    window: float = 60.0
    """Seconds a death counts, for the backoff and for giving up."""
    deaths_max: int = 5
    """Deaths of all slots together within `window` that the pool bears; one more and it gives up."""


def restart_policy(*, count: int) -> RestartPolicy:
    """`serve`'s policy: more than 5 deaths within 60 s, or twice the workers if that is more, is a crash
    loop; one event that kills every worker once (memory pressure) is not."""
    return RestartPolicy(deaths_max=max(5, 2 * count))


def restart_delay(*, policy: RestartPolicy, deaths: int) -> float:
    """Seconds before replacing a worker whose slot died `deaths` times within the window (this one included)."""
    return min(policy.backoff_first * 2 ** (deaths - 1), policy.backoff_max)


@dataclass(frozen=True, kw_only=True)
class WorkersState:
    """What the pool tells its workers (and `/health`) about itself."""

    up: int
    """Worker processes running, a replacement counted from its start (it listens once its engine is built)."""
    configured: int
    replaced: int
    """Workers started in place of dead ones since `serve` started."""


SINGLE_PROCESS = WorkersState(up=1, configured=1, replaced=0)
"""A process that is no pool's worker serves alone (a plain `serve`, `runserver`, the tests)."""


def workers_state_write(*, path: Path, state: WorkersState) -> None:
    """Replace the file at once (a rename), so a reader sees the old state or the new, never half of one."""
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(asdict(state)))
    os.replace(partial, path)


def workers_state_read(*, path: Path) -> WorkersState | None:
    """The state in `path`; None when it is gone or unreadable (the pool is stopping)."""
    try:
        raw = json.loads(path.read_text())
        return WorkersState(up=int(raw["up"]), configured=int(raw["configured"]), replaced=int(raw["replaced"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def workers_state_current(*, environ: Mapping[str, str] = os.environ) -> WorkersState | None:
    """This process's pool as its parent last wrote it, or `SINGLE_PROCESS` outside a pool."""
    path = environ.get(WORKERS_STATE_ENV)
    return SINGLE_PROCESS if not path else workers_state_read(path=Path(path))


@dataclass
class _Slot:
    """One of the `count` places a worker runs in, and its recent deaths (its backoff)."""

    process: subprocess.Popen[bytes] | None = None
    last_pid: int | None = None
    deaths: list[float] = field(default_factory=list)
    restart_at: float | None = None


@dataclass
class WorkerPool:
    """`count` copies of `argv` (a worker's `serve` command line), each replaced when it dies."""

    argv: Sequence[str]
    count: int
    grace: float
    """Seconds a worker gets after SIGTERM (its drain) before SIGKILL."""
    policy: RestartPolicy
    on_worker_exit: Callable[[int], None] | None = None
    """Called with the pid of every worker that has exited (died, or stopped by the pool) once it is
    reaped and before its replacement starts, in the thread that runs the pool: where a later metrics
    exporter marks a process dead (prometheus_client's `mark_process_dead(pid)`)."""
    stopping: bool = False
    """Set by `stop` (a signal handler, SGLang's watcher thread) or by giving up: a plain flag, which a
    signal handler can set at any moment without a lock."""
    failure: int | None = None
    """The status of the death that made the pool give up; None while it has not."""
    replaced: int = 0
    _slots: list[_Slot] = field(default_factory=list)
    _deaths: list[float] = field(default_factory=list)
    _state_path: Path | None = None
    _metrics_path: Path | None = None
    """Where the workers write their metrics (prometheus_client's multiprocess files), summed by any scrape."""

    def run(self) -> None:
        """Start the workers and keep `count` of them running until `stop` is called or they die too
        often; then stop them all.

        The loop polls a flag instead of blocking on an event: `stop` runs in a signal handler on this
        same thread, and a handler that needs a lock this thread holds at that moment would deadlock; a
        tenth of a second is nothing next to a worker's start. Workers are started from this thread
        only, since Linux's parent-death signal follows the thread that forked a child, not its process.
        """
        with tempfile.TemporaryDirectory(prefix="openjev-workers-") as directory:
            self._state_path = Path(directory) / "state.json"
            self._metrics_path = Path(directory) / "metrics"
            self._metrics_path.mkdir()
            self._slots = [_Slot() for _ in range(self.count)]
            try:  # a worker that cannot be started (no memory to fork) still lets the others drain
                for slot in self._slots:
                    self._slot_start(slot=slot)
                self._state_write()
                log.info("started %d API workers: pids %s", self.count, ", ".join(str(pid) for pid in self._pids()))
                while not self.stopping:
                    now = time.monotonic()
                    self._deaths_handle(now=now)
                    if not self.stopping:
                        self._replacements_start(now=now)
                    time.sleep(POLL_SECONDS)
            finally:
                self._workers_stop()

    def stop(self) -> None:
        self.stopping = True

    def _pids(self) -> list[int]:
        return [slot.process.pid for slot in self._slots if slot.process is not None]

    def _slot_start(self, *, slot: _Slot) -> None:
        assert self._state_path is not None
        assert self._metrics_path is not None
        env = {WORKERS_STATE_ENV: str(self._state_path), MULTIPROCESS_ENV: str(self._metrics_path)}
        slot.process = process_launch(argv=self.argv, env=env, preexec=parent_death_signal())

    def _state_write(self) -> None:
        assert self._state_path is not None
        state = WorkersState(up=len(self._pids()), configured=self.count, replaced=self.replaced)
        workers_state_write(path=self._state_path, state=state)

    def _exit_report(self, *, pid: int) -> None:
        if self._metrics_path is not None:
            metrics_process_dead(pid=pid, directory=self._metrics_path)
        if self.on_worker_exit is not None:
            self.on_worker_exit(pid)

    def _deaths_handle(self, *, now: float) -> None:
        """Reap the workers that exited since the last look, schedule their replacements, or give up."""
        died = False
        for slot in self._slots:
            if slot.process is None or (code := slot.process.poll()) is None:
                continue
            died = True
            pid = slot.last_pid = slot.process.pid
            slot.process = None
            self._exit_report(pid=pid)
            window = self.policy.window
            self._deaths = [*(t for t in self._deaths if now - t < window), now]
            slot.deaths = [*(t for t in slot.deaths if now - t < window), now]
            if len(self._deaths) > self.policy.deaths_max:
                log.error(
                    "API worker %d exited with %s, %d worker deaths within %.0f s (at most %d are replaced): "
                    "giving up, stopping the other workers",
                    pid,
                    returncode_describe(returncode=code),
                    len(self._deaths),
                    window,
                    self.policy.deaths_max,
                )
                self.failure = code
                self.stopping = True
                break
            delay = restart_delay(policy=self.policy, deaths=len(slot.deaths))
            slot.restart_at = now + delay
            log.error(
                "API worker %d exited with %s: replacing it in %.1f s (%d worker deaths within %.0f s, "
                "%d replaced so far)",
                pid,
                returncode_describe(returncode=code),
                delay,
                len(self._deaths),
                window,
                self.replaced,
            )
        if died:
            self._state_write()

    def _replacements_start(self, *, now: float) -> None:
        started = False
        for slot in self._slots:
            if slot.restart_at is None or now < slot.restart_at:
                continue
            slot.restart_at = None
            self._slot_start(slot=slot)
            assert slot.process is not None
            self.replaced += 1
            started = True
            log.warning(
                "API worker %d started in place of %d (replacement %d)", slot.process.pid, slot.last_pid, self.replaced
            )
        if started:
            self._state_write()

    def _workers_stop(self) -> None:
        """SIGTERM every worker at once (they drain side by side), then wait for each, SIGKILL past `grace`."""
        running = [slot.process for slot in self._slots if slot.process is not None]
        for process in running:
            signal_group(process.pid, signal.SIGTERM)
        for process in running:
            process_group_stop(process=process, grace=self.grace)
            self._exit_report(pid=process.pid)

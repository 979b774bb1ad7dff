"""Launching and watching a child server (SGLang) so that a dead backend never leaves a live API.

SGLang starts several processes of its own (tokenizer manager, scheduler, detokenizer; one per GPU
rank), so it is started in a new session, and so a new process group whose id is its pid: stopping
it signals the whole group, and nothing it spawned outlives the API. The health wait notices a child
that died while loading (bad flag, out of memory) at once instead of after the startup timeout.

No Django here: `api/management/commands/serve.py` decides what to do with a failure.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence

import httpx

from inference.backends.sglang import READINESS_ANSWERS

log = logging.getLogger(__name__)


class SupervisorError(Exception):
    """The child could not be brought up."""


class ChildExited(SupervisorError):
    """The child exited; `returncode` as Popen reports it (negative: killed by that signal)."""

    def __init__(self, *, name: str, returncode: int) -> None:
        super().__init__(f"{name} exited with {returncode_describe(returncode=returncode)}")
        self.returncode = returncode


class StartupTimeout(SupervisorError):
    """The child did not become healthy in time."""


class StartupCancelled(SupervisorError):
    """A stop was requested (SIGTERM) while waiting for the child."""


def returncode_describe(*, returncode: int) -> str:
    """`status 7`, or `signal 9 (SIGKILL)` for a child killed by a signal."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown"
        return f"signal {-returncode} ({name})"
    return f"status {returncode}"


def exit_status(*, returncode: int) -> int:
    """The status the API exits with when its child ended: never 0 (a child that exits, even
    cleanly, leaves the API without a backend), the child's own status when it has one, and the
    shell's 128 + N for a child killed by signal N."""
    if returncode > 0:
        return returncode
    if returncode < 0:
        return 128 - returncode
    return 1


def parent_death_signal() -> Callable[[], None] | None:
    """A preexec hook asking Linux to SIGTERM the child if this process dies without stopping it
    (SIGKILL, OOM): an orphaned SGLang would hold the GPU and the port for the next start."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # pragma: no cover - exotic libc
        return None

    def hook() -> None:
        prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

    return hook


def process_launch(
    *,
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    preexec: Callable[[], None] | None = None,
) -> subprocess.Popen[bytes]:
    """Start `argv` in its own session (its own process group), stdin closed, output inherited so its
    logs land in the container's log beside the API's. `preexec` runs in the child before exec."""
    full_env = {**os.environ, **(env or {})}
    log.info("launching: %s", shlex.join(argv))
    return subprocess.Popen(
        list(argv), env=full_env, cwd=cwd, stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=preexec
    )


def health_wait(
    *,
    url: str,
    process: subprocess.Popen[bytes] | None,
    timeout: float,
    name: str = "SGLang",
    interval: float = 0.5,
    stop: threading.Event | None = None,
    fallback_url: str | None = None,
) -> float:
    """Poll `url` until it answers 200; seconds waited.

    `fallback_url` is polled instead whenever `url` answers neither 200 nor 503: a gateway's
    `/readiness` is the check to wait on (its `/health` says 200 with no worker), and a bare SGLang,
    which has no such route (404, or 401 when it wants an API key everywhere but `/health`), falls back
    to its `/health`.

    Raises ChildExited as soon as `process` has exited, StartupTimeout after `timeout` seconds and
    StartupCancelled when `stop` is set. Connection errors and non-200 answers (SGLang says 503
    while it warms up) just mean "not yet".
    """
    started = time.monotonic()
    deadline = started + timeout
    last = "no answer yet"
    with httpx.Client(timeout=httpx.Timeout(5.0, connect=2.0)) as client:
        while True:
            if process is not None and (code := process.poll()) is not None:
                raise ChildExited(name=name, returncode=code)
            if stop is not None and stop.is_set():
                raise StartupCancelled(f"stopped while waiting for {name}")
            try:
                response = client.get(url)
                if response.status_code not in READINESS_ANSWERS and fallback_url is not None:
                    response = client.get(fallback_url)
                if response.status_code == 200:
                    return time.monotonic() - started
                last = f"HTTP {response.status_code}"
            except httpx.HTTPError as exc:
                last = type(exc).__name__
            if time.monotonic() >= deadline:
                raise StartupTimeout(f"{name} at {url} was not healthy after {timeout:.0f} s (last: {last})")
            if stop is not None:
                stop.wait(interval)
            else:
                time.sleep(interval)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - a recycled group id owned by someone else
        return False
    return True


def signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def process_group_stop(*, process: subprocess.Popen[bytes], grace: float) -> int | None:
    """SIGTERM the child's whole process group, SIGKILL it after `grace` seconds; the child's status.

    Members that outlive the leader (SGLang's scheduler processes) are waited for too: the group is
    gone, or killed, before this returns.
    """
    pgid = process.pid  # start_new_session: the child leads its own group
    if process.poll() is None or _group_alive(pgid):
        signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        process.poll()
        if process.returncode is not None and not _group_alive(pgid):
            return process.returncode
        time.sleep(0.05)
    log.warning("process group %d still alive %.0f s after SIGTERM: sending SIGKILL", pgid, grace)
    signal_group(pgid, signal.SIGKILL)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
        log.error("process %d did not exit after SIGKILL", process.pid)
    # Orphaned members are reaped by init; give them a moment, never forever (zombies answer kill(0)).
    until = time.monotonic() + 2
    while _group_alive(pgid) and time.monotonic() < until:
        time.sleep(0.05)
    return process.returncode


def process_watch(
    *, process: subprocess.Popen[bytes], on_exit: Callable[[int], None], name: str = "sglang-watch"
) -> threading.Thread:
    """A daemon thread that waits for the child and calls `on_exit(returncode)` when it ends."""

    def watch() -> None:
        on_exit(process.wait())

    thread = threading.Thread(target=watch, name=name, daemon=True)
    thread.start()
    return thread

"""The real SGLang model gateway (`smg`, pinned in uv.lock) as a subprocess, for tests and benchmarks.

The gateway runs the launch command of `deploy/compose.yaml`, with only its address, its metrics port,
its workers and (where a caller says so) its health-check pace replaced, so what the suite tests is
what is deployed.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import yaml

from testbed.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
FAST_HEALTH = {
    "--health-check-interval-secs": "1",
    "--health-failure-threshold": "1",
    "--health-success-threshold": "1",
}


def wait_until(predicate: Callable[[], bool], *, timeout: float = 10.0, what: str = "the condition") -> None:
    """Block the calling thread until `predicate()` holds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout} s")
        time.sleep(0.002)


def gateway_command(*, port: int, workers: list[str], flags: dict[str, str] | None = None) -> list[str]:
    """deploy/compose.yaml's gateway command on `127.0.0.1:port` in front of `workers`."""
    command = list(yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())["services"]["gateway"]["command"])
    command = command[: command.index("--worker-urls")]
    own = {
        "--host": "127.0.0.1",
        "--port": str(port),
        "--prometheus-host": "127.0.0.1",
        "--prometheus-port": str(free_port()),
    }  # its metrics listener would take 0.0.0.0:29000
    for flag, value in {**own, **(flags or {})}.items():
        if flag in command:
            command[command.index(flag) + 1] = value
        else:
            command += [flag, value]
    return [sys.executable, "-m", "smg", *command, *(["--worker-urls", *workers] if workers else [])]


class Gateway:
    """One `smg launch` process; its log goes to a file the failing test can read."""

    def __init__(self, *, workers: list[str], log_path: Path, flags: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.workers = workers
        self.log_path = log_path
        self._argv = gateway_command(port=self.port, workers=workers, flags=flags)
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Gateway:
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(self._argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.wait_for("/liveness", 200)
        if self.workers:
            self.wait_for("/readiness", 200)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            self._process.kill()  # its graceful stop keeps the port open for a 5 s settle window
            self._process.wait(timeout=10)

    def wait_for(self, path: str, status: int, timeout: float = 30.0) -> None:
        """Poll `path` until it answers `status`."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            assert self._process is not None and self._process.poll() is None, self.log()
            try:
                answer = httpx.get(self.url + path, timeout=2)
                if answer.status_code == status:
                    return
                last = f"{answer.status_code} {answer.text[:200]}"
            except httpx.HTTPError as exc:
                last = repr(exc)
            time.sleep(0.05)
        raise TimeoutError(f"{path} never answered {status} (last: {last})\n{self.log()}")

    def wait_all_healthy(self, timeout: float = 30.0) -> None:
        """Until every worker is registered and healthy (readiness needs only one)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            listed = httpx.get(self.url + "/workers", timeout=2).json()["workers"]
            if len(listed) == len(self.workers) and all(w["is_healthy"] for w in listed):
                return
            time.sleep(0.05)
        raise TimeoutError(f"not every worker is healthy: {listed}\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

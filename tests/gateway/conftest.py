"""The real SGLang model gateway (`smg`, pinned in uv.lock) in front of fake SGLang workers.

The gateway runs the launch command of `deploy/compose.yaml`, with only its address, its workers and
(where a test says so) its health-check pace replaced, so what the suite tests is what is deployed.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from evaluations.engine import engine_install
from inference.runner import Engine
from tests.conftest import _free_port, url_engine
from tests.fakes.sglang import FakeSGLang

ROOT = Path(__file__).resolve().parents[2]
MODEL = "Qwen/Qwen3.6-35B-A3B"
FAST_HEALTH = {"--health-check-interval-secs": "1", "--health-failure-threshold": "1",
               "--health-success-threshold": "1"}


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
    command = command[:command.index("--worker-urls")]
    own = {"--host": "127.0.0.1", "--port": str(port), "--prometheus-host": "127.0.0.1",
           "--prometheus-port": str(_free_port())}  # its metrics listener would take 0.0.0.0:29000
    for flag, value in {**own, **(flags or {})}.items():
        if flag in command:
            command[command.index(flag) + 1] = value
        else:
            command += [flag, value]
    return [sys.executable, "-m", "smg", *command, *(["--worker-urls", *workers] if workers else [])]


class Gateway:
    """One `smg launch` process; its log goes to a file the failing test can read."""

    def __init__(self, *, workers: list[str], log_path: Path, flags: dict[str, str] | None = None) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.workers = workers
        self.log_path = log_path
        self._argv = gateway_command(port=self.port, workers=workers, flags=flags)
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Gateway:
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(self._argv, stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL)
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


@pytest.fixture(scope="module")
def worker_pair() -> Iterator[tuple[FakeSGLang, FakeSGLang]]:
    with FakeSGLang(served_model_name=MODEL) as a, FakeSGLang(served_model_name=MODEL) as b:
        yield a, b


@pytest.fixture
def workers(worker_pair: tuple[FakeSGLang, FakeSGLang]) -> Iterator[tuple[FakeSGLang, FakeSGLang]]:
    """Both workers alive, with fresh records, controls and caches, before and after each test."""
    for worker in worker_pair:
        worker.reset()
        if worker._uvicorn is None:
            worker.revive()
    yield worker_pair
    for worker in worker_pair:
        worker.reset()
        if worker._uvicorn is None:
            worker.revive()


@pytest.fixture(scope="module")
def gateway(worker_pair: tuple[FakeSGLang, FakeSGLang], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    log = tmp_path_factory.mktemp("gateway") / "smg.log"
    with Gateway(workers=[w.url for w in worker_pair], log_path=log, flags=FAST_HEALTH) as running:
        yield running


@pytest.fixture
def live_gateway(gateway: Gateway, workers: tuple[FakeSGLang, FakeSGLang]) -> Gateway:
    """The module's gateway once both (revived) workers are back in its rotation."""
    gateway.wait_all_healthy()
    return gateway


@pytest.fixture(scope="module")
def empty_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with Gateway(workers=[], log_path=tmp_path_factory.mktemp("empty-gateway") / "smg.log") as running:
        yield running


def gateway_engine(gateway: Gateway, *, branch_mode: str = "batched", **overrides: object) -> Engine:
    return url_engine(gateway.url, branch_mode=branch_mode, **overrides)


@pytest.fixture
async def api_on(request: pytest.FixtureRequest) -> AsyncIterator[object]:
    """A factory: `await api_on(engine)` installs the engine and gives an ASGI client of the API."""
    from openjev_site.asgi import application

    clients: list[httpx.AsyncClient] = []

    def make(engine: Engine) -> httpx.AsyncClient:
        engine_install(engine)
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=application), base_url="http://testserver")
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()
    engine_install(None)

"""Real parts to break on purpose, for the fault scenario (`bench/faults.py`, `tests/gateway/test_faults.py`):
an SGLang stand-in in a process of its own (so it can be SIGKILLed and started again on its port), Redis
restarted the way an operator would, and an open-loop load that sends at a fixed rate whatever comes back.

In-process fakes cannot be SIGKILLed and a closed-loop load slows down exactly when the service does, which
hides what a client sees during a fault; hence processes and a fixed rate.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import redis

from testbed.smg import wait_until

ROOT = Path(__file__).resolve().parents[1]
REDIS_URL = "redis://127.0.0.1:6379/1"
"""CI's Redis, in a database of its own: the rate-limit tests empty database 0 of this service's counters
before and after each test, which would wipe the scenario's counts if both ran at once."""
REDIS_START = [
    "redis-server",
    "--daemonize",
    "yes",
    "--bind",
    "127.0.0.1",
    "-::1",
    "--port",
    "6379",
    "--save",
    "",
    "--appendonly",
    "no",
    "--dir",
    "/var/lib/redis",
    "--logfile",
    "/var/log/redis/ci.log",
]
"""How CI starts its Redis: no persistence, so a restart loses every count it held."""


class StandIn:
    """`python -m fake_sglang` on a fixed loopback port, in its own process: killable like a crashed worker."""

    def __init__(self, *, port: int, model: str, delay: float, log_path: Path) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self._argv = [
            sys.executable,
            "-m",
            "fake_sglang",
            "--port",
            str(port),
            "--served-model-name",
            model,
            "--delay",
            str(delay),
        ]
        self._log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start it and return once it answers `/health`."""
        self.launch()
        self.ready_wait()

    def launch(self) -> None:
        """Start the process (several start side by side: each spends seconds importing)."""
        with self._log_path.open("ab") as log:
            self._process = subprocess.Popen(
                self._argv,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )

    def ready_wait(self) -> None:
        wait_until(self._healthy, timeout=30, what=f"the stand-in on port {self.port} answering /health")

    def kill(self) -> None:
        """SIGKILL: its connections are reset and its port refuses until `start` again."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(10)

    def _healthy(self) -> bool:
        assert self._process is not None
        if self._process.poll() is not None:
            raise RuntimeError(f"the stand-in exited with {self._process.returncode}: {self._log_path.read_text()}")
        try:
            return httpx.get(self.url + "/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            time.sleep(0.1)  # wait_until polls every 2 ms: without a pause this spins a core the import needs
            return False


def redis_answers(url: str = REDIS_URL) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_timeout=1).ping())
    except redis.RedisError:
        return False


def redis_start() -> None:
    """Start CI's Redis unless it answers already (others' tests need it running)."""
    if not redis_answers():
        subprocess.run(REDIS_START, check=True, capture_output=True, timeout=30)
    wait_until(redis_answers, timeout=30, what="Redis answering PING")


def redis_restart(*, down_seconds: float) -> None:
    """Shut Redis down without saving (its counts are gone), leave it down `down_seconds`, start it again."""
    with contextlib.suppress(redis.ConnectionError):  # the shutdown closes the connection it came on
        redis.Redis.from_url(REDIS_URL, socket_timeout=2).shutdown(nosave=True)
    wait_until(lambda: not redis_answers(), timeout=10, what="Redis stopping")
    time.sleep(down_seconds)
    redis_start()


@dataclass(frozen=True)
class Caller:
    """One API key of the load: its name, its secret, the rate it sends at (from `start_after` seconds into
    the load on) and its own requests-per-minute limit."""

    name: str
    secret: str
    rate: float
    requests_per_minute: int | None = None
    start_after: float = 0.0


@dataclass(frozen=True)
class Sent:
    """One request of the load and what came of it; `status` 0: no HTTP answer (refused, reset, timed out)."""

    caller: str
    sent_at: float
    done_at: float
    status: int
    request_id: str | None
    error: str | None = None

    @property
    def latency_ms(self) -> float:
        return (self.done_at - self.sent_at) * 1000.0


@dataclass
class OpenLoad:
    """Each caller's requests at its fixed rate, from a thread of its own, until `stop` or `max_seconds`.

    Every request opens a connection of its own, as many clients behind a balancer do: the kernel then
    spreads them over the API's worker processes (SO_REUSEPORT hashes connections, not requests), so a
    killed worker really had traffic. Times are `time.time()`, the clock the rate limiter's windows use.
    """

    url: str
    path: str
    body: dict[str, Any]
    callers: list[Caller]
    max_seconds: float
    timeout: float = 10.0
    results: list[Sent] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), name="open-load", daemon=True)
        self._thread.start()

    def stop(self) -> list[Sent]:
        """Stop sending; return once every request sent has its answer (or its timeout)."""
        self._stop.set()
        assert self._thread is not None
        self._thread.join(self.max_seconds + self.timeout + 10)
        return sorted(self.results, key=lambda sent: sent.sent_at)

    async def _run(self) -> None:
        payload = json.dumps(self.body).encode()
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=self.url, limits=limits, timeout=self.timeout) as client:
            await asyncio.gather(*(self._caller_send(client, caller, payload) for caller in self.callers))

    async def _caller_send(self, client: httpx.AsyncClient, caller: Caller, payload: bytes) -> None:
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {caller.secret}"}
        started = time.monotonic() + caller.start_after
        tasks: list[asyncio.Task[None]] = []
        for index in range(int((self.max_seconds - caller.start_after) * caller.rate)):
            delay = started + index / caller.rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            if self._stop.is_set():
                break
            tasks.append(asyncio.create_task(self._one_send(client, caller.name, headers, payload)))
        await asyncio.gather(*tasks)

    async def _one_send(self, client: httpx.AsyncClient, caller: str, headers: dict[str, str], payload: bytes) -> None:
        sent_at = time.time()
        try:
            response = await client.post(self.path, content=payload, headers=headers)
        except httpx.HTTPError as exc:
            self.results.append(Sent(caller, sent_at, time.time(), 0, None, type(exc).__name__))
            return
        self.results.append(
            Sent(caller, sent_at, time.time(), response.status_code, response.headers.get("x-typesafe-request-id"))
        )

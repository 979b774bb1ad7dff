"""Batch jobs on the scale-out engine, on real parts: `serve` with `OPENJEV_TASK_ENGINE=celery`, a real Celery
worker (`celery -A openjev_site worker`) on the machine's Redis, the SGLang stand-in. The worker is SIGKILLed
mid-batch (its pool too, as when its machine goes), another is started, and the batch ends with every line once
in the output and once among the stored evaluations: the dead worker's unacknowledged tasks come back from the
broker and its claimed lines from their lease."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from api.decisions.openapi_examples import DECISIONS_REQUEST
from tests.batches.processes import (
    batch_ended,
    batch_env,
    batch_progressed,
    batch_uploaded,
    bodies_of,
    custom_ids,
    lines_taken_again,
    output_of,
    sdk_client,
    stand_in_process,
    stored_rows,
)
from tests.ops.helpers import ROOT, Serve, pid_alive

pytestmark = pytest.mark.servers

BROKER_URL = "redis://127.0.0.1:6379/13"
"""A database of the machine's Redis that only this test uses (emptied before it runs)."""
LEASE_SECONDS = 5
"""Short, so the dead worker's lines and tasks come back within the test (production: 300 s)."""


@pytest.fixture
def broker() -> str:
    connection = redis.Redis.from_url(BROKER_URL, socket_connect_timeout=2)
    try:
        connection.flushdb()
    except redis.RedisError as exc:
        pytest.fail(f"Redis is not running at {BROKER_URL} ({exc}); scripts/test.sh starts it")
    return BROKER_URL


@pytest.fixture
def stand_in() -> Iterator[str]:
    with stand_in_process(delay=0.02) as url:
        yield url


class CeleryWorker:
    """`celery -A openjev_site worker` in a session of its own (so its pool can be killed with it)."""

    def __init__(self, *, name: str, env: dict[str, str], log: Path) -> None:
        self.log_path = log
        self._log = log.open("wb")
        argv = [sys.executable, "-m", "celery", "-A", "openjev_site", "worker", "--loglevel=info"]
        argv += ["--concurrency=2", f"--hostname={name}@%h", "--without-mingle", "--without-gossip"]
        self.process = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while " ready." not in self.log_path.read_text(errors="replace"):
            assert self.process.poll() is None, self.log_path.read_text(errors="replace")
            assert time.monotonic() < deadline, "the Celery worker did not start"
            time.sleep(0.2)

    def killed(self) -> None:
        """SIGKILL the worker and its pool at once: no warm shutdown, nothing acknowledged or given back."""
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and _group_of(int(p)) == self.process.pid]
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)
        deadline = time.monotonic() + 10
        while any(pid_alive(pid) for pid in pids):
            assert time.monotonic() < deadline, "the Celery pool outlived its worker"
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        self._log.close()


def _group_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])
    except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
        return None


def test_a_celery_worker_killed_mid_batch_leaves_another_to_finish_it_with_every_line_once(broker, stand_in, tmp_path):
    env = batch_env(
        tmp_path,
        OPENJEV_TASK_ENGINE="celery",
        OPENJEV_CELERY_BROKER_URL=broker,
        OPENJEV_BATCH_LEASE_SECONDS=str(LEASE_SECONDS),
    )
    worker_env = env | {"OPENJEV_BACKEND": "sglang", "OPENJEV_BACKEND_URL": stand_in}
    bodies = bodies_of(DECISIONS_REQUEST, "input", 600)
    with Serve(["--connect", stand_in, "--migrate"], log=tmp_path / "serve.log", env=env) as serve:
        serve.wait_healthy()
        assert "batch_worker" not in serve.log  # on Celery, serve runs no worker of its own
        client = sdk_client(serve)
        first = CeleryWorker(name="first", env=worker_env, log=tmp_path / "celery-1.log")
        try:
            first.wait_ready()
            batch_id = batch_uploaded(client, url="/v1/decisions", bodies=bodies).id
            at_kill = batch_progressed(client, batch_id, done=100).request_counts
            first.killed()
        finally:
            first.stop()
        assert at_kill is not None and at_kill.completed < 600, "the batch ended before its worker was killed"
        time.sleep(1)
        assert client.batches.retrieve(batch_id).status == "in_progress"  # nobody works on it now
        second = CeleryWorker(name="second", env=worker_env, log=tmp_path / "celery-2.log")
        try:
            second.wait_ready()
            batch = batch_ended(client, batch_id, timeout=180)
        finally:
            second.stop()
        worked = (tmp_path / "celery-2.log").read_text(errors="replace")
        assert batch.status == "completed", (batch, worked[-3000:])
        assert batch.request_counts is not None and batch.request_counts.completed == 600
        assert sorted(line["custom_id"] for line in output_of(client, batch)) == custom_ids(600)
        assert stored_rows(tmp_path) == 600
        assert lines_taken_again(tmp_path) > 0  # lines the dead worker had claimed, answered by the second
        assert "batch_work" in worked and "succeeded" in worked
        serve.terminate()

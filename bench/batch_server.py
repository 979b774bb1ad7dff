"""bench/batch.py's server: `serve` on the stand-in with storage on, and what a measurement on it costs."""

from __future__ import annotations

import os
import resource
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.server import (
    ROOT,
    cpu_seconds,
    database_for_run,
    process_tree,
    server_command,
    server_stop,
    settled,
    wait_http,
)
from testbed.ports import free_port
from testbed.qwen3 import qwen3_dir


@dataclass(frozen=True)
class Server:
    url: str
    pid: int
    fake_pid: int


@dataclass(frozen=True)
class Cost:
    """What a measurement took: seconds; CPU seconds of the server (API and batch worker), of this process (the
    client loop, or the batch's upload and polling) and of the stand-in; the load average before and after."""

    seconds: float
    server_cpu: float
    client_cpu: float
    fake_cpu: float
    load: tuple[str, str]

    def line(self, *, items: int) -> str:
        cpu = {"server": self.server_cpu, "client": self.client_cpu, "stand-in": self.fake_cpu}
        per_item = ", ".join(f"{name} {seconds / items * 1000:.2f}" for name, seconds in cpu.items())
        return f"CPU ms/item: {per_item}; load {self.load[0]} -> {self.load[1]}"


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


@contextmanager
def measured(server: Server, costs: list[Cost]) -> Iterator[None]:
    """Time what runs inside and append its `Cost` to `costs`."""
    pids, load = process_tree(server.pid), loadavg()
    server_before, fake_before, own_before = cpu_seconds(pids), cpu_seconds([server.fake_pid]), own_cpu()
    start = time.monotonic()
    yield
    pids = list(dict.fromkeys([*pids, *process_tree(server.pid)]))  # a batch worker started again counts too
    costs.append(
        Cost(
            seconds=time.monotonic() - start,
            server_cpu=cpu_seconds(pids) - server_before,
            client_cpu=own_cpu() - own_before,
            fake_cpu=cpu_seconds([server.fake_pid]) - fake_before,
            load=(load, loadavg()),
        )
    )


@contextmanager
def server_running(*, fake_port: int, fake_pid: int, batch_concurrency: int) -> Iterator[Server]:
    """`serve --connect` the stand-in on a fresh SQLite file, storage full, its batch worker beside it, once what it
    does after it starts has settled."""
    with database_for_run(None) as database_url:
        port = free_port()
        env = {
            **os.environ,
            "OPENJEV_DATABASE_URL": database_url,
            "OPENJEV_STORE_EVALUATIONS": "full",
            "OPENJEV_SPOOL_DIR": tempfile.mkdtemp(prefix="openjev-batch-spool-"),
            "OPENJEV_TOKENIZER": str(qwen3_dir()),
            "OPENJEV_SECRET_KEY": "bench-batch-secret-key-not-the-public-default",
            "OPENJEV_BATCH_CONCURRENCY": str(batch_concurrency),
            "DJANGO_SETTINGS_MODULE": "openjev_site.settings",
        }
        command = server_command(server="uvicorn", port=port, fake_port=fake_port, workers=1)
        log = (Path(tempfile.mkdtemp(prefix="openjev-batch-bench-")) / "serve.log").open("wb")
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_http(f"http://127.0.0.1:{port}/health")
            settled(pids=process_tree(process.pid))
            yield Server(url=f"http://127.0.0.1:{port}", pid=process.pid, fake_pid=fake_pid)
        finally:
            server_stop(process)
            log.close()

"""Server benchmark: the API as deployed (an ASGI server in its own process) against a zero-latency
fake SGLang in another process, driven at a fixed concurrency.

Prints, per workload and branch mode: evaluations/s, p50/p99 latency, server CPU ms per evaluation
(the steadiest figure on a shared 2-core machine: utime+stime of the server process from /proc) and
backend requests per evaluation.

    .venv/bin/python bench/server.py                       # uvicorn, both modes, 3 and 64 questions
    .venv/bin/python bench/server.py --server daphne --requests 400
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluations.openapi.examples import README_REQUEST  # noqa: E402
from testbed.load import requests_send  # noqa: E402
from testbed.ports import free_port  # noqa: E402
from testbed.qwen3 import qwen3_dir  # noqa: E402

STATE_600 = " ".join(
    f"Message {i}: the customer reports that order #{4400 + i} arrived late and the invoice shows a double charge."
    for i in range(30)
)
QUESTIONS_64 = {
    f"q{i:02d}": (
        {"type": "noul", "instructions": f"Does the text mention issue number {i}?"}
        if i % 3 == 0
        else {
            "type": "choice",
            "instructions": f"Which team owns topic {i}?",
            "criteria": {"Billing": "Payments", "Logistics": "Shipping", "Support": None},
        }
        if i % 3 == 1
        else {"type": "score", "instructions": f"How urgent is aspect {i}?", "criteria": ["Low", "Medium", "High"]}
    )
    for i in range(64)
}
WORKLOADS = {
    "3 questions (README example)": README_REQUEST,
    "64 questions, ~600-token state": {"model": "jev-latest", "state": STATE_600, "questions": QUESTIONS_64},
}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serve_fake(port: int) -> None:
    """Run the fake in this process; print its call count on SIGTERM (the parent reads it)."""
    from fake_sglang import FakeSGLang

    fake = FakeSGLang(port=port, served_model_name="Qwen/Qwen3.6-35B-A3B")
    stop = asyncio.Event()

    async def run() -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGUSR1, lambda: print(json.dumps({"calls": fake.generate_calls}), flush=True))
        await stop.wait()

    with fake:
        print("ready", flush=True)
        asyncio.run(run())


def wait_http(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not become healthy")


def server_command(server: str, port: int) -> list[str]:
    python = sys.executable
    if server == "daphne":
        return [python, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "openjev_site.asgi:application"]
    return [
        python,
        "-m",
        "uvicorn",
        "openjev_site.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--no-access-log",
        "--log-level",
        "warning",
        "--lifespan",
        "off",
    ]


async def drive(url: str, body: dict[str, Any], *, requests: int,
                concurrency: int) -> tuple[list[float], dict[int, int]]:
    """Latencies (seconds) and the count of each status."""
    results = await requests_send(url=url, body=body, count=requests, concurrency=concurrency)
    return [ms / 1000.0 for _, _, ms in results], dict(Counter(status for status, _, _ in results))


def fake_calls(fake: subprocess.Popen[str]) -> int:
    assert fake.stdout is not None
    fake.send_signal(signal.SIGUSR1)
    return int(json.loads(fake.stdout.readline())["calls"])


def measure(args: argparse.Namespace, mode: str, fake_port: int, fake: subprocess.Popen[str]) -> None:
    port = free_port()
    env = {
        **os.environ,
        "OPENJEV_BACKEND": "sglang",
        "OPENJEV_BACKEND_URL": f"http://127.0.0.1:{fake_port}",
        "OPENJEV_TOKENIZER": str(qwen3_dir()),
        "OPENJEV_MODEL": "Qwen/Qwen3.6-35B-A3B",
        "OPENJEV_BRANCH_MODE": mode,
        "OPENJEV_STORE_EVALUATIONS": args.store,
        "DJANGO_SETTINGS_MODULE": "openjev_site.settings",
        "PYTHONPATH": str(ROOT),
    }
    server = subprocess.Popen(server_command(args.server, port), cwd=ROOT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/health")
        for name, body in WORKLOADS.items():
            requests = args.requests if "3 q" in name else max(args.requests // 4, 50)
            asyncio.run(drive(url, body, requests=min(32, requests), concurrency=args.concurrency))  # warm caches
            calls_before, cpu_before, start = fake_calls(fake), cpu_seconds(server.pid), time.perf_counter()
            latencies, statuses = asyncio.run(drive(url, body, requests=requests, concurrency=args.concurrency))
            elapsed, cpu = time.perf_counter() - start, cpu_seconds(server.pid) - cpu_before
            calls = fake_calls(fake) - calls_before
            ok = statuses.get(200, 0)
            q = statistics.quantiles(latencies, n=100)
            print(
                f"{args.server:7s} {mode:8s} {name:32s} {ok / elapsed:7.1f} eval/s  p50 {q[49] * 1000:6.1f} ms  "
                f"p99 {q[98] * 1000:6.1f} ms  server CPU {cpu / requests * 1000:5.2f} ms/eval  "
                f"backend calls/eval {calls / requests:5.2f}  statuses {statuses}",
                flush=True,
            )
    finally:
        server.terminate()
        server.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", choices=["uvicorn", "daphne"], default="uvicorn")
    parser.add_argument("--mode", choices=["batched", "parallel", "both"], default="both")
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--store", choices=["off", "metadata", "full"], default="off")
    parser.add_argument("--serve-fake", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_fake:
        serve_fake(args.serve_fake)
        return
    fake_port = free_port()
    fake = subprocess.Popen(
        [sys.executable, __file__, "--serve-fake", str(fake_port)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert fake.stdout is not None and fake.stdout.readline().strip() == "ready"
        for mode in ["batched", "parallel"] if args.mode == "both" else [args.mode]:
            measure(args, mode, fake_port, fake)
    finally:
        fake.terminate()
        fake.wait(10)


if __name__ == "__main__":
    main()

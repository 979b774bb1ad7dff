"""Server benchmark: the API as deployed (`manage.py serve --connect`, N worker processes) against a
zero-latency fake SGLang in another process.

Per workload (R3: the README's 3 questions; R64: 64 questions on a ~600-token state), storage level and
worker count it prints: evaluations/s, p50/p99 latency at a fixed concurrency (steady load), server CPU
ms per evaluation at steady load and in bursts (`--concurrency` simultaneous requests, all awaited, then
the next burst), and backend requests per evaluation. Server CPU is utime+stime of `serve` and all its
processes from /proc: the steadiest figure on a shared machine.

    .venv/bin/python bench/server.py                                  # batched, storage off and full, 1 worker
    .venv/bin/python bench/server.py --workers 1 2 --store full --requests 1200
    .venv/bin/python bench/server.py --server daphne --mode parallel
    .venv/bin/python bench/server.py --store full --database postgresql://postgres@127.0.0.1:5432/postgres
    .venv/bin/python bench/server.py --api systemone decisions --store full   # both wire formats, same questions
    .venv/bin/python bench/server.py --limits off redis --workloads R3          # what counting per-key limits costs
    .venv/bin/python bench/server.py --store off --otel                         # what tracing costs (spans to OTLP)

Storage goes to a fresh SQLite file per run, or with `--database` to a throwaway PostgreSQL database
created beside the one named (and dropped afterwards): there the database server, not the API
process, does the index work, so the API's CPU for storage is its writer thread alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openjev_site.settings")

import django  # noqa: E402

django.setup()

from bench.workloads import API_PATHS, BODIES, WORKLOADS  # noqa: E402
from testbed.load import requests_send  # noqa: E402
from testbed.otlp import OtlpReceiver  # noqa: E402
from testbed.ports import free_port  # noqa: E402
from testbed.qwen3 import qwen3_dir  # noqa: E402


def process_tree(root: int) -> list[int]:
    """`root` and every process descended from it (the workers of `serve --workers N`)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    tree, frontier = [root], [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier]
        tree += children
        frontier = children
    return tree


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def serve_fake(
    port: int,
    *,
    tokenizer: Path | None = None,
    keep_records: bool = True,
    delay: float = 0.0,
    batch_delay: float | None = None,
) -> None:
    """Run the fake in this process; print its call count on SIGUSR1 (the parent reads it). With `tokenizer`
    (a model directory) it also takes `text` prompts, tokenized there as SGLang does (bench/peer.py). `delay`
    and `batch_delay` are its service times (`FakeSGLang`). SIGUSR2 starts recording the `/generate` bodies (with
    `keep_records` off), the next SIGUSR2 prints those recorded since, forgets them and stops: bench/latency.py
    captures the service's calls so, and its measured load leaves no records behind."""
    from fake_sglang import FakeSGLang, text_tokenizer_load

    fake = FakeSGLang(
        port=port,
        served_model_name="Qwen/Qwen3.6-35B-A3B",
        tokenizer=None if tokenizer is None else text_tokenizer_load(tokenizer),
        keep_records=keep_records,
        delay=delay,
        batch_delay=batch_delay,
    )
    stop = asyncio.Event()

    def bodies_capture() -> None:
        bodies = [record["body"] for record in fake.requests]
        fake.reset(controls=False, cache=False)
        if not fake.keep_records:
            fake.keep_records = True
            print(json.dumps({"recording": True}), flush=True)
            return
        fake.keep_records = keep_records
        print(json.dumps({"bodies": bodies}), flush=True)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGUSR1, lambda: print(json.dumps({"calls": fake.generate_calls}), flush=True))
        loop.add_signal_handler(signal.SIGUSR2, bodies_capture)
        await stop.wait()

    with fake:
        print("ready", flush=True)
        asyncio.run(run())


def fake_process_start(
    *, port: int, script: Path = Path(__file__), options: Sequence[str] = ()
) -> subprocess.Popen[str]:
    """`script --serve-fake PORT [options]` (`serve_fake`) in a process of its own, once it is ready: its CPU is
    not the server's, and SIGUSR1 asks it for its call count."""
    fake = subprocess.Popen(
        [sys.executable, str(script), "--serve-fake", str(port), *options],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if fake.stdout is None or fake.stdout.readline().strip() != "ready":
        fake.kill()
        raise RuntimeError("the SGLang stand-in did not start")
    return fake


KEYS_SCRIPT = """
import json, os
from django.core.management import call_command
from audit.keys import apikey_issue
from audit.models import ApiKey
call_command("migrate", interactive=False, verbosity=0)
issued = {}
for name, limits in json.loads(os.environ["BENCH_KEY_LIMITS"]).items():
    key = apikey_issue(name=name, owner=os.environ["BENCH_KEY_OWNER"])
    ApiKey.objects.filter(pk=key.id).update(**limits)
    issued[name] = key.secret
print(json.dumps(issued))
"""


def keys_launch(
    *, database_url: str, limits: Mapping[str, Mapping[str, int | None]], owner: str
) -> subprocess.Popen[str]:
    """Migrate the throwaway database and issue one key per name with its limits (`ApiKey` fields), in a process
    that runs while the other parts start."""
    env = {
        **os.environ,
        "OPENJEV_DATABASE_URL": database_url,
        "BENCH_KEY_LIMITS": json.dumps(limits),
        "BENCH_KEY_OWNER": owner,
        "DJANGO_SETTINGS_MODULE": "openjev_site.settings",
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.Popen(
        [sys.executable, "manage.py", "shell", "-c", KEYS_SCRIPT],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def keys_read(process: subprocess.Popen[str]) -> dict[str, str]:
    """The secrets `keys_launch` issued, by name."""
    out, err = process.communicate(timeout=120)
    if process.returncode != 0:
        raise RuntimeError(f"issuing the keys failed: {err[-2000:]}")
    issued: dict[str, str] = json.loads(out.strip().splitlines()[-1])
    return issued


def wait_http(url: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not become healthy")


def settled(*, pids: list[int], busy: float = 0.05, within: float = 60.0) -> None:
    """Wait (up to `within` s) until the server's processes use under `busy` of a core over a second: what a
    server does once after it starts (`serve`'s batch worker starting beside it: seconds of CPU on a busy machine)
    is no evaluation's CPU. bench/peer.py and bench/latency.py measure after it too."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        before = cpu_seconds(pids)
        time.sleep(1.0)
        if cpu_seconds(pids) - before < busy:
            return


def server_stop(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM (a graceful drain), then SIGKILL for a server that outstays 30 s."""
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait(10)


def server_command(*, server: str, port: int, fake_port: int, workers: int) -> list[str]:
    command = [
        sys.executable,
        "manage.py",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--server",
        server,
        "--connect",
        f"http://127.0.0.1:{fake_port}",
        "--migrate",
    ]
    return command + (["--workers", str(workers)] if workers != 1 else [])


def fake_calls(fake: subprocess.Popen[str]) -> int:
    assert fake.stdout is not None
    fake.send_signal(signal.SIGUSR1)
    return int(json.loads(fake.stdout.readline())["calls"])


def burst_cpu_ms(*, url: str, body: dict[str, Any], pids: list[int], size: int, bursts: int, path: str) -> float:
    """Server CPU ms per evaluation over `bursts` bursts of `size` simultaneous requests."""
    before = cpu_seconds(pids)
    for _ in range(bursts):
        asyncio.run(requests_send(url=url, body=body, count=size, concurrency=size, path=path))
    return (cpu_seconds(pids) - before) / (size * bursts) * 1000


@contextlib.contextmanager
def database_for_run(server_url: str | None) -> Iterator[str]:
    """A fresh SQLite file, or a throwaway PostgreSQL database on the server `server_url` names."""
    if server_url is None:
        yield f"sqlite:///{Path(tempfile.mkdtemp(prefix='openjev-bench-')) / 'db.sqlite3'}"
        return
    import psycopg

    name = f"openjev_bench_{os.getpid()}_{time.monotonic_ns()}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield server_url.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


LIMITS: dict[str, dict[str, str]] = {
    "off": {},
    "memory": {
        "OPENJEV_KEY_REQUESTS_PER_MINUTE": str(10**9),
        "OPENJEV_KEY_TOKENS_PER_MINUTE": str(10**12),
        "OPENJEV_KEY_CONCURRENCY": str(10**6),
    },
}
LIMITS["redis"] = {**LIMITS["memory"], "OPENJEV_REDIS_URL": "redis://127.0.0.1:6379/2"}
"""Per-key limits for `--limits`: none, all three counted in-process, or all three in a Redis on this machine
(limits no request reaches: what is measured is the counting)."""


OTEL_OFF = {"OTEL_EXPORTER_OTLP_ENDPOINT": "", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ""}
"""Tracing off in the server whatever the bench's own environment says."""


def measure(
    args: argparse.Namespace,
    *,
    mode: str,
    store: str,
    workers: int,
    limits: str,
    fake_port: int,
    fake: subprocess.Popen[str],
) -> None:
    with database_for_run(args.database) as database_url:
        measure_on(
            args,
            mode=mode,
            store=store,
            workers=workers,
            limits=limits,
            fake_port=fake_port,
            fake=fake,
            database_url=database_url,
        )


def measure_on(
    args: argparse.Namespace,
    *,
    mode: str,
    store: str,
    workers: int,
    limits: str,
    fake_port: int,
    fake: subprocess.Popen[str],
    database_url: str,
) -> None:
    port = free_port()
    env = {
        **os.environ,
        "OPENJEV_TOKENIZER": str(qwen3_dir()),
        "OPENJEV_MODEL": "Qwen/Qwen3.6-35B-A3B",
        "OPENJEV_BRANCH_MODE": mode,
        "OPENJEV_STORE_EVALUATIONS": store,
        "OPENJEV_DATABASE_URL": database_url,
        "OPENJEV_SECRET_KEY": "bench-" + "x" * 50,
        "DJANGO_SETTINGS_MODULE": "openjev_site.settings",
        "PYTHONPATH": str(ROOT),
        **LIMITS[limits],
        **(
            {"OTEL_EXPORTER_OTLP_ENDPOINT": args.otel_endpoint, "OTEL_BSP_SCHEDULE_DELAY": "500"}
            if args.otel_endpoint
            else {}
        ),
    }
    log = (Path(tempfile.mkdtemp(prefix="openjev-bench-")) / "serve.log").open("w")  # per-request warnings
    server = subprocess.Popen(
        server_command(server=args.server, port=port, fake_port=fake_port, workers=workers),
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/health")
        settled(pids=process_tree(server.pid))
        pids = process_tree(server.pid)
        for name, api in itertools.product(args.workloads, args.api):
            if name not in BODIES[api]:
                continue  # R400 is a Decisions workload only
            body, path = BODIES[api][name], API_PATHS[api]
            requests = args.requests if name == "R3" else max(args.requests // (4 if name == "R64" else 20), 30)
            asyncio.run(requests_send(url=url, body=body, count=64, concurrency=args.concurrency, path=path))  # warm
            calls_before, cpu_before, start = fake_calls(fake), cpu_seconds(pids), time.perf_counter()
            results = asyncio.run(
                requests_send(url=url, body=body, count=requests, concurrency=args.concurrency, path=path)
            )
            elapsed, cpu = time.perf_counter() - start, cpu_seconds(pids) - cpu_before
            calls = fake_calls(fake) - calls_before
            statuses = dict(Counter(status for status, _, _ in results))
            q = statistics.quantiles([ms for _, _, ms in results], n=100)
            burst = burst_cpu_ms(
                url=url,
                body=body,
                pids=pids,
                size=args.concurrency,
                bursts=max(4, requests // args.concurrency // 2),
                path=path,
            )
            database = "" if args.database is None else " postgresql"
            print(
                f"{args.server} {mode} store={store:4s}{database} workers={workers} limits={limits:6s} {api:9s} "
                f"{name:4s} "
                f"{statuses.get(200, 0) / elapsed:6.1f} eval/s  p50 {q[49]:6.1f} ms  p99 {q[98]:6.1f} ms  "
                f"CPU steady {cpu / requests * 1000:5.2f} burst {burst:5.2f} ms/eval  "
                f"backend calls/eval {calls / requests:4.2f}  statuses {statuses}",
                flush=True,
            )
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", choices=["uvicorn", "daphne"], default="uvicorn")
    parser.add_argument("--mode", choices=["batched", "parallel"], nargs="+", default=["batched"])
    parser.add_argument("--store", choices=["off", "metadata", "full"], nargs="+", default=["off", "full"])
    parser.add_argument("--workers", type=int, nargs="+", default=[1], help="API processes (0 = one per core)")
    parser.add_argument(
        "--workloads",
        choices=sorted({n for bodies in BODIES.values() for n in bodies}),
        nargs="+",
        default=list(WORKLOADS),
    )
    parser.add_argument(
        "--limits",
        choices=list(LIMITS),
        nargs="+",
        default=["off"],
        help="per-key limits counted: off, in-process, or in Redis on 127.0.0.1:6379",
    )
    parser.add_argument(
        "--api",
        choices=list(API_PATHS),
        nargs="+",
        default=["systemone"],
        help="the routes to send each workload to (the same questions on each)",
    )
    parser.add_argument("--requests", type=int, default=600, help="steady-load requests of R3 (R64: a quarter)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--database", help="a PostgreSQL URL: store into a throwaway database on that server")
    parser.add_argument(
        "--otel",
        action="store_true",
        help="trace every request to an OTLP/HTTP receiver in this process (testbed/otlp.py): the cost of tracing",
    )
    parser.add_argument("--serve-fake", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_fake:
        serve_fake(args.serve_fake)
        return
    receiver = contextlib.nullcontext() if not args.otel else OtlpReceiver()
    with receiver as spans:
        args.otel_endpoint = getattr(spans, "url", None)
        measure_all(args)
        if spans is not None:
            print(f"spans received: {len(spans.received())}", flush=True)


def measure_all(args: argparse.Namespace) -> None:
    fake_port = free_port()
    fake = fake_process_start(port=fake_port)
    try:
        for mode in args.mode:
            for workers in args.workers:
                for store, limits in itertools.product(args.store, args.limits):
                    measure(
                        args, mode=mode, store=store, workers=workers, limits=limits, fake_port=fake_port, fake=fake
                    )
    finally:
        fake.terminate()
        fake.wait(10)


if __name__ == "__main__":
    main()

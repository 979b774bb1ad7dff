"""Hostile input against the server: each class of request an attacker can send (`bench/hostile_attacks.py`: what
each sends is in its docstring), measured by the server CPU it costs against the bytes it put on the wire, and by
how long it stalls `GET /health/live` while the server works on it; then one key flooding the body lane while
another key's large bodies are timed.

The server is `manage.py serve` as deployed, on the SGLang stand-in in another process, with auth on (a key in
`OPENJEV_API_KEY`, keys issued in the database for the run, wrong keys for the throttle), per-key limits counted in
Redis and one worker by default (so every probe meets the worker the hostile request is on).

For each class, in turn:

- CPU: the class is sent again and again (at least twice, for at least a second) with nothing else running; the
  CPU seconds of serve's API processes (the batch worker beside them left out) over that time, less what they spend
  idle, divided by the requests sent, against the bytes each put on the wire: CPU ms per KB sent (the target: at
  most 50 for a request the server refuses);
- stall: the class once more while a thread probes `/health/live` every few milliseconds on its own connection;
  the worst probe's latency is how long the event loop, which serves every client, was held (the target: under
  100 ms).

    .venv/bin/python bench/hostile.py                           # every class, then the lane's check
    .venv/bin/python bench/hostile.py --classes zstd_arrays stream_no_key --no-lane
    .venv/bin/python bench/hostile.py --workers 2 --no-redis    # as `serve --workers 2`, limits in each process
    .venv/bin/python bench/hostile.py --classes unknown_fields --lane-control  # and the flood sent elsewhere

It prints a table (class, bytes on the wire, status, server CPU ms per request and per KB sent, probes' p50 and
worst ms) and the lane's check (the other key's statuses and latencies while the flood runs). The lane's control
sends the same flood to a second server on the same machine: on a machine of few cores the flood's client and the
server it floods take cores from everyone, so what the other key loses to sharing a process with the flood is the
difference between the two.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openjev_site.settings")

import django  # noqa: E402

django.setup()

from api.systemone.examples import README_REQUEST  # noqa: E402
from bench.hostile_attacks import ATTACKS, FLOOD, KEY, Sent, Target, post  # noqa: E402
from bench.server import (  # noqa: E402
    cpu_seconds,
    database_for_run,
    fake_process_start,
    keys_launch,
    keys_read,
    process_tree,
    wait_http,
)
from testbed.ports import free_port  # noqa: E402
from testbed.qwen3 import qwen3_dir  # noqa: E402

__all__ = ["ATTACKS", "KEY", "REDIS_URL", "Probe", "Target", "server_start"]

REDIS_URL = "redis://127.0.0.1:6379/3"
PROBE_INTERVAL = 0.005
CPU_MEASURE_SECONDS = 2.0
CPU_REPEATS_MAX = 50
CPU_MS_PER_KB_MAX = 50.0
STALL_MS_MAX = 100.0
LANE_SECONDS = 15.0
LANE_FLOODERS = 24
LARGE = {**README_REQUEST, "state": "The parcel for my order is late and the invoice is wrong. " * 1_500}
"""The other key's body in the lane's check: about 87 KB (read in the lane), under the token budget."""


class Probe:
    """`GET /health/live` in a loop on its own connection, unless `paused` (while server CPU is measured); the
    latencies seen while `recording`."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.latencies: list[float] = []
        self.recording = False
        self.stopped = threading.Event()
        self.paused = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=600) as client:
            while not self.stopped.is_set():
                if self.paused.is_set():
                    time.sleep(PROBE_INTERVAL)
                    continue
                start = time.perf_counter()
                client.get("/health/live")
                if self.recording:
                    self.latencies.append((time.perf_counter() - start) * 1000)
                time.sleep(PROBE_INTERVAL)

    def measure(self, attack: Callable[[], Sent]) -> tuple[Sent, list[float]]:
        self.latencies = []
        self.recording = True
        try:
            sent = attack()
            time.sleep(0.05)  # what the request left behind (a log line, a stored row) runs after the answer
        finally:
            self.recording = False
        return sent, self.latencies


class ServerCpu:
    """CPU seconds of serve's API processes and any process they start, not the batch worker beside
    them, less their idle rate. The processes are listed again for each measure: one started during it counts
    whole, its start-up included."""

    def __init__(self, server: subprocess.Popen[bytes]) -> None:
        self.root = server.pid
        start, before = time.perf_counter(), cpu_seconds(self.pids())
        time.sleep(2.0)
        self.idle_per_second = (cpu_seconds(self.pids()) - before) / (time.perf_counter() - start)

    def pids(self) -> list[int]:
        return [pid for pid in process_tree(self.root) if not _batch_worker(pid)]

    def spent(self, work: Callable[[], object]) -> float:
        start, before = time.perf_counter(), cpu_seconds(self.pids())
        work()
        time.sleep(0.05)
        elapsed = time.perf_counter() - start
        return max(0.0, cpu_seconds(self.pids()) - before - self.idle_per_second * elapsed)


def _batch_worker(pid: int) -> bool:
    try:
        return b"batch_worker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def cpu_per_request(*, cpu: ServerCpu, attack: Callable[[], Sent]) -> tuple[Sent, float]:
    """The last `Sent` and the server CPU seconds per request, over repeats of at least `CPU_MEASURE_SECONDS`."""
    sent: list[Sent] = []

    def repeated() -> None:
        start = time.perf_counter()
        while len(sent) < 2 or (time.perf_counter() - start < CPU_MEASURE_SECONDS and len(sent) < CPU_REPEATS_MAX):
            sent.append(attack())

    spent = cpu.spent(repeated)
    return sent[-1], spent / len(sent)


def server_start(
    *, workers: int, redis: bool, requests_per_minute: int, fake_port: int, database_url: str, log: IO[str]
) -> tuple[str, subprocess.Popen[bytes]]:
    """`manage.py serve` on the stand-in with auth on (`KEY`, and any key issued in the database), once it answers."""
    port = free_port()
    env = {
        **os.environ,
        "OPENJEV_TOKENIZER": str(qwen3_dir()),
        "OPENJEV_MODEL": "Qwen/Qwen3.6-35B-A3B",
        "OPENJEV_DATABASE_URL": database_url,
        "OPENJEV_SECRET_KEY": "bench-" + "x" * 50,
        "OPENJEV_API_KEY": KEY,
        "OPENJEV_KEY_REQUESTS_PER_MINUTE": str(requests_per_minute),
        "DJANGO_SETTINGS_MODULE": "openjev_site.settings",
        "PYTHONPATH": str(ROOT),
    }
    if redis:
        env["OPENJEV_REDIS_URL"] = REDIS_URL
    command = [
        sys.executable,
        "manage.py",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--connect",
        f"http://127.0.0.1:{fake_port}",
        "--migrate",
        "--workers",
        str(workers),
    ]
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_http(url + "/health")
    return url, server


@dataclass(frozen=True)
class LaneCheck:
    alone: list[float]
    """The other key's latencies (ms) before the flood, one body at a time."""
    statuses: list[int | str]
    latencies: list[float]
    """Its statuses and latencies while the flood runs."""
    flood: Counter[str]
    """The flood's statuses."""


def lane_check(target: Target, *, flooded: Target | None = None, seconds: float = LANE_SECONDS) -> LaneCheck:
    """The `other` key's 87 KB bodies, one after another, first alone, then while `LANE_FLOODERS` loops of the 2 MB
    body of 150,000 unknown fields from the `flood` key run for `seconds`, against `target` or, for the control,
    against another server on the same machine (`flooded`)."""
    body = httpx.Request("POST", "http://x", json=LARGE).content
    alone = [post(target, "/v1/systemone", body, key=target.keys["other"]).seconds * 1000 for _ in range(5)]
    flooding = threading.Event()
    flooding.set()
    flood: Counter[str] = Counter()

    def flood_loop() -> None:
        while flooding.is_set():
            aimed = flooded or target
            flood[str(post(aimed, "/v1/decisions", FLOOD, key=aimed.keys["flood"]).status)] += 1

    statuses: list[int | str] = []
    latencies: list[float] = []
    with ThreadPoolExecutor(LANE_FLOODERS) as pool:
        for _ in range(LANE_FLOODERS):
            pool.submit(flood_loop)
        time.sleep(1.0)  # the flood fills its share of the lane
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            sent = post(target, "/v1/systemone", body, key=target.keys["other"])
            statuses.append(sent.status)
            latencies.append(sent.seconds * 1000)
        flooding.clear()
    return LaneCheck(alone=alone, statuses=statuses, latencies=latencies, flood=flood)


def lane_report(check: LaneCheck, *, label: str = "lane") -> bool:
    """Prints the lane's check; whether every body of the other key was answered (none refused for the flood)."""
    shown = Counter(str(s) for s in check.statuses)
    print(
        f"{label}: the other key's 87 KB bodies alone: p50 {statistics.median(check.alone):.0f} ms; while one key "
        f"floods ({LANE_FLOODERS} loops of 2 MB of 150,000 unknown fields): {len(check.statuses)} sent, "
        f"{dict(shown)}, p50 {statistics.median(check.latencies):.0f} ms, worst {max(check.latencies):.0f} ms; "
        f"the flood's {sum(check.flood.values())} requests: {dict(check.flood)}"
    )
    return set(shown) == {"200"}


def lane_control(
    *,
    target: Target,
    workers: int,
    redis: bool,
    fake_port: int,
    requests_per_minute: int,
    database_url: str,
    log: IO[str],
) -> None:
    """The lane's check with the flood sent to a second server (the same keys, database and stand-in)."""
    url, other = server_start(
        workers=workers,
        redis=redis,
        requests_per_minute=requests_per_minute,
        fake_port=fake_port,
        database_url=database_url,
        log=log,
    )
    try:
        lane_report(lane_check(target, flooded=Target(url=url, keys=target.keys)), label="control, flood elsewhere")
    finally:
        other.terminate()
        other.wait(timeout=60)


def classes_run(*, target: Target, cpu: ServerCpu, names: list[str]) -> bool:
    probe = Probe(target.url)
    probe.thread.start()
    held = True
    columns = f"{'bytes':>9} {'status':>14} {'CPU ms':>8} {'CPU ms/KB':>10} {'probe p50 ms':>13} {'worst ms':>9}"
    print(f"{'class':<22} {columns}")
    try:
        for name in names:
            attack = ATTACKS[name]
            probe.paused.set()
            time.sleep(0.1)  # the probe's last request answered
            sent, per_request = cpu_per_request(cpu=cpu, attack=lambda a=attack: a(target))  # type: ignore[misc]
            probe.paused.clear()
            _, latencies = probe.measure(lambda a=attack: a(target))  # type: ignore[misc]
            per_kb = per_request * 1000 / (sent.size / 1024)
            p50 = statistics.median(latencies) if latencies else float("nan")
            worst = max(latencies) if latencies else float("nan")
            refused = isinstance(sent.status, str) or sent.status >= 400
            within = (not refused or per_kb <= CPU_MS_PER_KB_MAX) and not worst > STALL_MS_MAX
            held = held and within
            print(
                f"{name:<22} {sent.size:>9} {sent.status!s:>14} {per_request * 1000:>8.1f} {per_kb:>10.2f}"
                f" {p50:>13.1f} {worst:>9.1f}{'' if within else '  OVER'}",
                flush=True,
            )
    finally:
        probe.stopped.set()
    return held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--classes", nargs="+", choices=sorted(ATTACKS), default=list(ATTACKS))
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--no-redis", action="store_true", help="count the per-key limits in each process")
    parser.add_argument("--no-lane", action="store_true", help="leave out the lane's check")
    parser.add_argument(
        "--lane-control",
        action="store_true",
        help="after the lane's check, its control: the same flood sent to a second server on the same machine, so "
        "the other key's latency shows what it owes to the machine's cores rather than to sharing a process",
    )
    parser.add_argument(
        "--requests-per-minute", type=int, default=100_000, help="the keys' request limit (low: a key over it)"
    )
    args = parser.parse_args()
    if not args.no_redis:
        import redis

        redis.Redis.from_url(REDIS_URL).flushdb()
    fake_port = free_port()
    fake = fake_process_start(port=fake_port)
    log_path = Path(tempfile.mkdtemp(prefix="openjev-hostile-")) / "serve.log"
    limits = {"limited": {"requests_per_minute": 1}, "flood": {}, "other": {}}
    with database_for_run(None) as database_url, log_path.open("w") as log:
        keys = keys_read(keys_launch(database_url=database_url, limits=limits, owner="bench/hostile.py"))
        url, server = server_start(
            workers=args.workers,
            redis=not args.no_redis,
            requests_per_minute=args.requests_per_minute,
            fake_port=fake_port,
            database_url=database_url,
            log=log,
        )
        target = Target(url=url, keys=keys)
        try:
            limits_where = "each process" if args.no_redis else "Redis"
            print(f"serve --workers {args.workers}, auth on, limits in {limits_where}, load {os.getloadavg()}")
            cpu = ServerCpu(server)
            print(f"serve's idle CPU: {cpu.idle_per_second * 1000:.1f} ms/s")
            held = True
            if not args.no_lane:
                held = lane_report(lane_check(target))
            if args.lane_control:
                lane_control(
                    target=target,
                    workers=args.workers,
                    redis=not args.no_redis,
                    fake_port=fake_port,
                    requests_per_minute=args.requests_per_minute,
                    database_url=database_url,
                    log=log,
                )
            held = classes_run(target=target, cpu=cpu, names=args.classes) and held
        finally:
            server.terminate()
            server.wait(timeout=60)
            fake.terminate()
            fake.wait(timeout=30)
    print(f"load average after: {os.getloadavg()}; server log: {log_path}")
    print("every class within its bounds" if held else "some class OVER its bounds")


if __name__ == "__main__":
    main()

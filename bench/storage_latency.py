"""What making each answer durable before it leaves costs (issue 41): the latency an open-loop load sees at a fixed
rate with storage on, this checkout against another one (the code before the spool):

    git worktree add /tmp/base 9aa982e
    .venv/bin/python bench/storage_latency.py --base /tmp/base --rate 100 --duration 30 --runs 3
    git worktree remove /tmp/base

For each run, and in each run each checkout in turn (the order alternates between runs): an SGLang stand-in
(`python -m fake_sglang`, a process of its own, `--delay` s per call), `manage.py serve --connect` from that
checkout (one worker, storage `full` on a fresh SQLite file it migrates itself; here the spool in a fresh folder on
the same disk), warmed with `--warmup` s of the load, then `bench/open_loop.py` (a process of its own: Poisson
arrivals at `--rate` evaluations/s for `--duration` s, each timed from when it was due). It prints each run's
p50/p90/p99 ms, errors, the rows stored against the answers (after serve's SIGTERM), the server's CPU per
evaluation, how many answers spent at most 2, 5 and 10 ms in the `store` phase (from `/metrics`: with the spool,
the wait for the sync), and the 1-minute load average at its end; then the added latency (this checkout − base)
at p50 and p99: the median over the runs, and each run's. Both checkouts run with this checkout's interpreter and
packages.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.server import cpu_seconds, process_tree, wait_http  # noqa: E402
from testbed.faults import StandIn  # noqa: E402
from testbed.ports import free_port  # noqa: E402
from testbed.qwen3 import qwen3_dir  # noqa: E402

MODEL = "Qwen/Qwen3.6-35B-A3B"
BODY = {
    "model": "jev-latest",
    "state": "Customer: the app crashed twice while I paid, and I was charged twice. I want a refund.",
    "questions": {
        "refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"},
        "team": {
            "type": "choice",
            "instructions": "Which team should handle this?",
            "criteria": {"Billing": "Payments, refunds", "Technical": "Bugs, outages", "Sales": None},
        },
    },
}


@dataclass(frozen=True)
class Measured:
    checkout: str
    run: int
    latencies_ms: list[float]
    errors: int
    answered: int
    stored: int
    load_average: float
    cpu_ms: float
    """The server's CPU (every process of serve) per evaluation of the measured load."""
    store_le: dict[float, float]
    """Of the evaluations answered since serve started, the share whose `store` phase (handing the record to
    storage; with the spool, the wait until it is synced) took at most each bucket's seconds."""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def serve_env(*, checkout: Path, database: Path, spool: Path, backend_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "OPENJEV_TOKENIZER": str(qwen3_dir()),
        "OPENJEV_MODEL": MODEL,
        "OPENJEV_BACKEND": "sglang",
        "OPENJEV_BACKEND_URL": backend_url,
        "OPENJEV_STORE_EVALUATIONS": "full",
        "OPENJEV_DATABASE_URL": f"sqlite:///{database}",
        "OPENJEV_SPOOL_DIR": str(spool),
        "OPENJEV_BATCH_WORKER": "off",
        "OPENJEV_SECRET_KEY": "bench-" + "x" * 50,
        "OTEL_EXPORTER_OTLP_ENDPOINT": "",
        "DJANGO_SETTINGS_MODULE": "openjev_site.settings",
        "PYTHONPATH": str(checkout),
    }


@dataclass(frozen=True)
class Load:
    """What `bench/open_loop.py` printed: the answered evaluations' latencies, and the others."""

    latencies_ms: list[float]
    answered: int
    errors: int


def load_run(*, url: str, body: Path, rate: float, duration: float, seed: int) -> Load:
    command = [sys.executable, str(ROOT / "bench" / "open_loop.py"), "--url", url, "--body", str(body)]
    options = ["--rate", str(rate), "--duration", str(duration), "--seed", str(seed)]
    done = subprocess.run([*command, *options], cwd=ROOT, capture_output=True, text=True, check=True)
    printed = json.loads(done.stdout)
    return Load(
        latencies_ms=[float(x) for x in printed["latencies_ms"]],
        answered=int(printed["statuses"].get("200", 0)),
        errors=int(printed["errors"]),
    )


def checkout_measure(
    *, name: str, checkout: Path, run: int, args: argparse.Namespace, backend_url: str, body: Path
) -> Measured:
    """One checkout's serve, warmed, then measured; its rows counted after its SIGTERM."""
    workdir = Path(tempfile.mkdtemp(prefix=f"openjev-storage-latency-{name}-"))
    database = workdir / "db.sqlite3"
    env = serve_env(checkout=checkout, database=database, spool=workdir / "spool", backend_url=backend_url)
    python = [sys.executable, str(checkout / "manage.py")]
    subprocess.run([*python, "migrate", "--verbosity", "0"], cwd=checkout, env=env, check=True)
    port = free_port()
    with (workdir / "serve.log").open("wb") as log:
        server = subprocess.Popen(
            [*python, "serve", "--host", "127.0.0.1", "--port", str(port), "--connect", backend_url],
            cwd=checkout,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/health", timeout=180)
        warm = load_run(url=url, body=body, rate=args.rate, duration=args.warmup, seed=run + 1000)
        cpu_before = cpu_seconds(process_tree(server.pid))
        measured = load_run(url=url, body=body, rate=args.rate, duration=args.duration, seed=run)
        cpu = cpu_seconds(process_tree(server.pid)) - cpu_before
        load_average = os.getloadavg()[0]
        store_le = store_phase_read(url=url)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(60)
    with sqlite3.connect(database) as connection:
        stored = int(connection.execute("SELECT count(*) FROM evaluations_evaluation").fetchone()[0])
    return Measured(
        checkout=name,
        run=run,
        latencies_ms=measured.latencies_ms,
        errors=measured.errors,
        answered=warm.answered + measured.answered,
        stored=stored,
        load_average=load_average,
        cpu_ms=1000 * cpu / max(1, measured.answered + measured.errors),
        store_le=store_le,
    )


STORE_BUCKET = re.compile(
    r'^openjev_phase_duration_seconds_bucket\{(?=[^}]*phase="store")[^}]*le="([^"]+)"[^}]*\} (\S+)$'
)


def store_phase_read(*, url: str) -> dict[float, float]:
    """The `store` phase's cumulative histogram from `/metrics`, as shares of its count."""
    text = httpx.get(url + "/metrics", timeout=10).text
    counts = {float(m.group(1)): float(m.group(2)) for line in text.splitlines() if (m := STORE_BUCKET.match(line))}
    total = counts.get(float("inf"), 0.0)
    return {le: n / total for le, n in sorted(counts.items()) if total and le != float("inf")}


def lines(results: list[Measured], *, args: argparse.Namespace) -> list[str]:
    out = [
        f"{args.rate:g} evaluations/s for {args.duration:g} s per run (after {args.warmup:g} s of warm-up), "
        f"stand-in delay {args.delay * 1000:g} ms per call, storage full on SQLite, one worker; 2-core machine",
        "",
        "| run | checkout | p50 ms | p90 ms | p99 ms | errors | answered | stored | server CPU ms/eval "
        "| store phase ≤ 2 / 5 / 10 ms | load average (1 min) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for m in results:
        shares = " / ".join(f"{100 * m.store_le.get(le, 0.0):.0f} %" for le in (0.002, 0.005, 0.01))
        out.append(
            f"| {m.run} | {m.checkout} | {percentile(m.latencies_ms, 50):.1f} | {percentile(m.latencies_ms, 90):.1f} "
            f"| {percentile(m.latencies_ms, 99):.1f} | {m.errors} | {m.answered} | {m.stored} | {m.cpu_ms:.2f} "
            f"| {shares} | {m.load_average:.2f} |"
        )
    added: dict[int, list[float]] = {50: [], 99: []}
    for run in sorted({m.run for m in results}):
        by = {m.checkout: m for m in results if m.run == run}
        for q in added:
            added[q].append(percentile(by["this"].latencies_ms, q) - percentile(by["base"].latencies_ms, q))
    out += [
        "",
        "added latency (this − base), median over the runs: "
        + ", ".join(
            f"p{q} {statistics.median(v):+.1f} ms (runs: {', '.join(f'{x:+.1f}' for x in v)})" for q, v in added.items()
        ),
    ]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, required=True, help="the other checkout (e.g. a worktree at 9aa982e)")
    parser.add_argument("--rate", type=float, default=100.0, help="evaluations per second")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds measured per run and checkout")
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--delay", type=float, default=0.01, help="the stand-in's seconds per call")
    args = parser.parse_args()
    print(f"{datetime.datetime.now():%Y-%m-%d %H:%M}, load average {os.getloadavg()[0]:.2f} at the start", flush=True)
    body = Path(tempfile.mkdtemp(prefix="openjev-storage-latency-")) / "body.json"
    body.write_text(json.dumps(BODY))
    stand_in = StandIn(port=free_port(), model=MODEL, delay=args.delay, log_path=body.parent / "stand-in.log")
    stand_in.start()
    results = []
    try:
        for run in range(args.runs):
            order = [("base", args.base), ("this", ROOT)]
            for name, checkout in order if run % 2 == 0 else order[::-1]:
                measured = checkout_measure(
                    name=name, checkout=checkout, run=run, args=args, backend_url=stand_in.url, body=body
                )
                results.append(measured)
                print(
                    f"run {run} {name}: p50 {percentile(measured.latencies_ms, 50):.1f} ms, "
                    f"p99 {percentile(measured.latencies_ms, 99):.1f} ms, load average {measured.load_average:.2f}",
                    flush=True,
                )
    finally:
        stand_in.kill()
    print("\n".join(lines(results, args=args)))


if __name__ == "__main__":
    main()

"""Added latency at a GPU-like backend latency, and server CPU per evaluation, under open-loop load (issue 42).

The SGLang stand-in (`fake_sglang`, a process of its own, the real Qwen3 tokenizer for the peer's `text` prompts)
answers each `/generate` call after a fixed service time and burns no CPU for it: `--warm-ms` (15) for a single
prompt (the shared prefix's warm-up), `--batch-ms` (10) for a batched call (the question branches). The load is
`bench/open_loop.py` in a process of its own (its CPU is reported): Poisson arrivals at each `--rates` value for
`--duration` seconds, each evaluation timed from when it was due. Configurations (`--configs`):

- `raw`: no service; the two `/generate` calls the service makes for the workload, one after the other, straight
  to the stand-in. Their bodies are captured from the service itself at the start (the stand-in records them).
- `on`: `manage.py serve --connect`, one uvicorn worker, storage `full` on a fresh SQLite file (an answer waits
  until its evaluation is durable in the local spool: the group-committed `fdatasync` is part of the figure).
- `off`: the same with storage `off`.  `on2`: storage `full`, `--workers 2`.
- `peer`: llm2jev 0.6.1 as `bench/peer.py` runs it (its virtual environment made once under `.cache/peer/`).

Per run, configuration and rate it prints p50/p90/p99 ms, errors, added = served − raw at p50 and p99 (raw of
the same run and rate), server and stand-in CPU ms per evaluation (utime+stime from /proc: the server's
processes, the stand-in's), the generator's CPU, the 1-minute load average at the end of the measurement and how
busy the two cores were over it (all processes, from /proc/stat); then the highest rate with p99 < 100 ms and no
errors per configuration and run. Each server is started once per run and warmed with `--warmup` seconds of load;
the order of the configurations alternates between runs.

    .venv/bin/python bench/latency.py                                   # everything, 20 s each: about 10 minutes
    .venv/bin/python bench/latency.py --rates 100 --configs raw on --duration 10 --runs 3
    .venv/bin/python bench/latency.py --rates 50 100 --configs raw on peer --duration 5   # a quick look, ~1 minute
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.peer import PATH, answers_check, ours_start, peer_python, peer_start  # noqa: E402
from bench.server import (  # noqa: E402  (sets up Django for serve's settings)
    cpu_seconds,
    database_for_run,
    fake_process_start,
    process_tree,
    serve_fake,
    server_stop,
    settled,
    wait_http,
)
from bench.workloads import WORKLOADS  # noqa: E402
from fake_sglang import text_tokenizer_load  # noqa: E402
from testbed.ports import free_port  # noqa: E402
from testbed.qwen3 import qwen3_dir  # noqa: E402

CONFIGS = ("raw", "on", "off", "on2", "peer")
RATES = (25.0, 50.0, 100.0, 200.0)
P99_BOUND_MS = 100.0
OPEN_LOOP = Path(__file__).with_name("open_loop.py")


@dataclass(frozen=True)
class Measured:
    """One configuration at one rate in one run."""

    run: int
    config: str
    rate: float
    p50: float
    p90: float
    p99: float
    answered: int
    errors: int
    statuses: dict[str, int]
    server_cpu_ms: float
    backend_cpu_ms: float
    generator_cpu_s: float
    late_ms: float
    load1: float
    busy: float


def cores_busy() -> tuple[int, int]:
    """(busy, total) jiffies of all cores so far, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def quantile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else float("nan")


def open_loop_run(*, url: str, body: Path, mode: str, rate: float, duration: float, seed: int) -> dict:
    command = [sys.executable, str(OPEN_LOOP), "--url", url, "--body", str(body), "--mode", mode, "--path", PATH]
    command += ["--rate", str(rate), "--duration", str(duration), "--seed", str(seed)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the load generator failed: {done.stderr[-2000:]}")
    result: dict = json.loads(done.stdout)
    return result


def measure(
    args: argparse.Namespace, *, run: int, config: str, rate: float, url: str, server_pid: int | None, fake_pid: int
) -> Measured:
    """One open-loop measurement, with the CPU of the server's processes and the stand-in's over it."""
    pids = process_tree(server_pid) if server_pid is not None else []
    mode, body = ("raw", args.raw_body) if config == "raw" else ("service", args.service_body)
    server_before, fake_before, busy_before = cpu_seconds(pids), cpu_seconds([fake_pid]), cores_busy()
    result = open_loop_run(url=url, body=body, mode=mode, rate=rate, duration=args.duration, seed=args.seed + run)
    server_cpu, fake_cpu = cpu_seconds(pids) - server_before, cpu_seconds([fake_pid]) - fake_before
    busy_after = cores_busy()
    latencies, evaluations = result["latencies_ms"], max(1, sum(result["statuses"].values()))
    return Measured(
        run=run,
        config=config,
        rate=rate,
        p50=quantile(latencies, 50),
        p90=quantile(latencies, 90),
        p99=quantile(latencies, 99),
        answered=len(latencies),
        errors=result["errors"],
        statuses=result["statuses"],
        server_cpu_ms=server_cpu / evaluations * 1000,
        backend_cpu_ms=fake_cpu / evaluations * 1000,
        generator_cpu_s=result["cpu_s"],
        late_ms=result["late_ms"],
        load1=os.getloadavg()[0],
        busy=(busy_after[0] - busy_before[0]) / max(1, busy_after[1] - busy_before[1]) * (os.cpu_count() or 1),
    )


@contextmanager
def server_running(args: argparse.Namespace, *, config: str, fake_port: int) -> Iterator[tuple[str, int | None]]:
    """The configuration's server on the stand-in, healthy and warmed: (its URL, its pid); the stand-in's for raw."""
    if config == "raw":
        yield f"http://127.0.0.1:{fake_port}", None
        return
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with database_for_run(None) as database_url:
        if config == "peer":
            server = peer_start(args.peer, port=port, fake_port=fake_port)
        else:
            store, workers = ("off", 1) if config == "off" else ("full", 2 if config == "on2" else 1)
            server = ours_start(store=store, port=port, fake_port=fake_port, database_url=database_url, workers=workers)
        try:
            wait_http(url + "/health")
            answers_check(url, args.workload)
            if args.warmup > 0:
                open_loop_run(url=url, body=args.service_body, mode="service", rate=50, duration=args.warmup, seed=0)
            settled(pids=process_tree(server.pid))
            yield url, server.pid
        finally:
            server_stop(server)


def calls_capture(args: argparse.Namespace, *, fake: subprocess.Popen[str], fake_port: int, config: str) -> list[dict]:
    """The `/generate` bodies `config`'s server (`on`: ours, `peer`) sends for one evaluation, after one that warms
    it (the stand-in records them between two SIGUSR2s)."""
    assert fake.stdout is not None
    quiet = argparse.Namespace(**{**vars(args), "warmup": 0})
    with server_running(quiet, config=config, fake_port=fake_port) as (url, _):
        fake.send_signal(signal.SIGUSR2)
        if json.loads(fake.stdout.readline()) != {"recording": True}:
            raise RuntimeError("the stand-in did not start recording")
        response = httpx.post(url + PATH, json=WORKLOADS[args.workload], timeout=60)
        fake.send_signal(signal.SIGUSR2)
        bodies: list[dict] = json.loads(fake.stdout.readline())["bodies"]
    if response.status_code != 200 or not bodies:
        raise RuntimeError(f"capturing {config}'s calls failed: {response.status_code}, {len(bodies)} calls")
    return bodies


def tokenizing_ms(*, bodies: list[dict]) -> float:
    """What SGLang's tokenizer would spend on the calls' `text` prompts (none for `input_ids`): the Qwen3
    `tokenizer.json` through HF `tokenizers`, as SGLang's TokenizerManager (and the stand-in) encodes a call's texts
    in one batch; process CPU ms per evaluation, best of 5 rounds of 20."""
    texts = [[b["text"]] if isinstance(b["text"], str) else b["text"] for b in bodies if "text" in b]
    if not texts:
        return 0.0
    tokenize, rounds = text_tokenizer_load(qwen3_dir()), []
    for _ in range(6):
        start = time.process_time()
        for _ in range(20):
            for batch in texts:
                tokenize(batch)
        rounds.append((time.process_time() - start) / 20 * 1000)
    return min(rounds[1:])


def whole_system(rows: list[Measured], *, tokenizing: dict[str, float]) -> None:
    """Server and backend CPU per evaluation together, per configuration and rate (means over the runs)."""
    print(
        "\nwhole system, CPU ms per evaluation (means over the runs): server + the stand-in as measured, and server + "
        "SGLang's tokenizing estimated (the rest of SGLang's work is the same for every client)"
    )
    print("| config | rate/s | server | stand-in | server + stand-in | tokenizing (est.) | server + tokenizing |")
    print("|---|---|---|---|---|---|---|")
    for config in [c for c in CONFIGS if c != "raw" and any(m.config == c for m in rows)]:
        for rate in sorted({m.rate for m in rows}):
            mine = [m for m in rows if (m.config, m.rate) == (config, rate)]
            if not mine:
                continue
            server = statistics.mean(m.server_cpu_ms for m in mine)
            backend = statistics.mean(m.backend_cpu_ms for m in mine)
            tokens = tokenizing["peer" if config == "peer" else "on"]
            print(
                f"| {config} | {rate:.0f} | {server:.2f} | {backend:.2f} | {server + backend:.2f} | {tokens:.2f} | "
                f"{server + tokens:.2f} |"
            )


def line(m: Measured, *, raw: Measured | None) -> str:
    added = "" if raw is None or m.config == "raw" else f"  added {m.p50 - raw.p50:+6.1f} / {m.p99 - raw.p99:+6.1f}"
    return (
        f"run {m.run} {m.config:4s} {m.rate:5.0f}/s  p50 {m.p50:6.1f}  p90 {m.p90:6.1f}  p99 {m.p99:6.1f} ms  "
        f"errors {m.errors:3d}/{m.answered + m.errors}{added:28s}  server CPU {m.server_cpu_ms:5.2f}  "
        f"stand-in {m.backend_cpu_ms:5.2f} ms/eval  generator {m.generator_cpu_s:4.1f} s  late {m.late_ms:5.1f} ms  "
        f"load1 {m.load1:4.1f}  cores busy {m.busy:3.1f}" + (f"  statuses {m.statuses}" if m.errors else "")
    )


def table(rows: list[Measured]) -> None:
    """Every measurement as a Markdown table (docs/benchmarks.md), then the highest rate under the p99 bound."""
    raws = {(m.run, m.rate): m for m in rows if m.config == "raw"}
    print(
        "\n| run | config | rate/s | p50 | p90 | p99 | errors | added p50 | added p99 | server CPU ms/eval | "
        "stand-in CPU ms/eval | generator CPU s | load1 | cores busy |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for m in sorted(rows, key=lambda m: (m.rate, CONFIGS.index(m.config), m.run)):
        raw = raws.get((m.run, m.rate))
        added = ("", "") if raw is None or m.config == "raw" else (f"{m.p50 - raw.p50:+.1f}", f"{m.p99 - raw.p99:+.1f}")
        print(
            f"| {m.run} | {m.config} | {m.rate:.0f} | {m.p50:.1f} | {m.p90:.1f} | {m.p99:.1f} | {m.errors} | "
            f"{added[0]} | {added[1]} | {m.server_cpu_ms:.2f} | {m.backend_cpu_ms:.2f} | {m.generator_cpu_s:.1f} | "
            f"{m.load1:.1f} | {m.busy:.1f} |"
        )
    print(f"\nhighest rate with p99 < {P99_BOUND_MS:.0f} ms and no errors, per run:")
    for config in sorted({m.config for m in rows}, key=CONFIGS.index):
        per_run = []
        for run in sorted({m.run for m in rows}):
            fine = [
                m.rate for m in rows if (m.config, m.run) == (config, run) and m.p99 < P99_BOUND_MS and not m.errors
            ]
            per_run.append(f"{max(fine):.0f}/s" if fine else "none")
        print(f"  {config:4s} {'  '.join(per_run)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", choices=CONFIGS, nargs="+", default=list(CONFIGS))
    parser.add_argument("--rates", type=float, nargs="+", default=list(RATES), help="evaluations per second")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of arrivals per measurement")
    parser.add_argument("--runs", type=int, default=1, help="runs, alternating the order of the configurations")
    parser.add_argument("--warm-ms", type=float, default=15.0, help="the stand-in's service time for one prompt")
    parser.add_argument("--batch-ms", type=float, default=10.0, help="its service time for a batched call")
    parser.add_argument("--workload", choices=list(WORKLOADS), default="R3")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds of load at 50/s after each server starts")
    parser.add_argument("--seed", type=int, default=42, help="the arrivals' seed (run n uses seed + n)")
    parser.add_argument("--serve-fake", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_fake:
        delays = {"delay": args.warm_ms / 1000, "batch_delay": args.batch_ms / 1000}
        serve_fake(args.serve_fake, tokenizer=qwen3_dir(), keep_records=False, **delays)
        return
    measure_all(args)


def measure_all(args: argparse.Namespace) -> None:
    args.peer = peer_python() if "peer" in args.configs else None
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True)
    print(
        f"{datetime.datetime.now():%Y-%m-%d %H:%M}  ours {commit.stdout.strip()}  {args.workload}  stand-in "
        f"{args.warm_ms:g} ms warm-up / {args.batch_ms:g} ms batch  {args.duration:g} s per rate  "
        f"{os.cpu_count()} cores, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}",
        flush=True,
    )
    fake_port = free_port()
    options = ["--warm-ms", str(args.warm_ms), "--batch-ms", str(args.batch_ms)]
    fake = fake_process_start(port=fake_port, script=Path(__file__), options=options)
    rows: list[Measured] = []
    tokenizing: dict[str, float] = {"on": 0.0, "peer": 0.0}
    try:
        scratch = Path(tempfile.mkdtemp(prefix="openjev-latency-"))
        args.service_body, args.raw_body = scratch / "service.json", scratch / "raw.json"
        args.service_body.write_text(json.dumps(WORKLOADS[args.workload]))
        bodies = calls_capture(args, fake=fake, fake_port=fake_port, config="on")
        args.raw_body.write_text(json.dumps(bodies))
        tokenizing["on"] = tokenizing_ms(bodies=bodies)
        if args.peer is not None:
            tokenizing["peer"] = tokenizing_ms(
                bodies=calls_capture(args, fake=fake, fake_port=fake_port, config="peer")
            )
        print(
            f"captured {len(bodies)} /generate calls per evaluation from the service; SGLang's tokenizing of the "
            + ", ".join(
                f"{config}'s calls {ms:.2f} ms" for config, ms in tokenizing.items() if config != "peer" or args.peer
            ),
            flush=True,
        )
        for run in range(1, args.runs + 1):
            order = args.configs if run % 2 else args.configs[::-1]
            for config in order:
                with server_running(args, config=config, fake_port=fake_port) as (url, pid):
                    for rate in args.rates:
                        rows.append(
                            measure(args, run=run, config=config, rate=rate, url=url, server_pid=pid, fake_pid=fake.pid)
                        )
                        raw = next((m for m in rows if (m.run, m.rate, m.config) == (run, rate, "raw")), None)
                        print(line(rows[-1], raw=raw), flush=True)
    finally:
        fake.terminate()
        fake.wait(10)
    table(rows)
    whole_system(rows, tokenizing=tokenizing)


if __name__ == "__main__":
    main()

"""Against the closest open peer: our server as deployed beside llm2jev 0.6.1 (PyPI), in the same run, on the
same zero-latency SGLang stand-in, with the same bodies.

Both servers answer `POST /v1/systemone` and score each question from its labels' log-probs on SGLang
(`/generate` with `token_ids_logprob`, the shared prefix warmed first). Ours runs as `bench/server.py` runs it
(`manage.py serve --connect`, uvicorn, one worker, storage `full` on a fresh SQLite file, or `--store off`);
the peer is `python -m llm2jev --backend sglang` (a ThreadingHTTPServer) with the Qwen3 tokenizer directory
the tests use (`testbed/qwen3.py`) as its `--model`, offline (HF_HUB_OFFLINE=1: nothing is downloaded).
The stand-in (`fake_sglang`, in a process of its own, given the same real Qwen3 tokenizer) serves the model
as Qwen/Qwen3.6-35B-A3B.

Per run, server and workload (R3: the README's 3 questions; R64: 64 questions on a ~600-token state, from
bench/workloads.py) it prints evaluations/s, p50/p99 at `--concurrency` (16) clients, server CPU ms per
evaluation at steady load and in bursts (utime+stime of the server's processes from /proc, as bench/server.py
measures), the stand-in's CPU ms per evaluation and backend calls per evaluation, then the ratios ours/peer;
`--runs 3` repeats that, alternating which server goes first, and ends with every run's figures and their
spread. Each server's answer to each workload is checked first: 200, one answer per question.

Not like for like, and why the peer's CPU is lower: llm2jev sends `text` and SGLang tokenizes it server-side,
so the peer's tokenization lands on the stand-in's process (its "stand-in CPU" column), not on the peer's;
ours sends `input_ids`, having tokenized the state and each question itself (to count tokens, fit the
context and pick labels in context). Ours also authenticates, validates every field, stores the evaluation
and its answers (`full`) and asks some question shapes in more than one option order (per-model tuning).

llm2jev is not a dependency of this project. The script makes (once, then reuses) a virtual environment of
its own under `.cache/peer/` (git-ignored) with `uv venv` on Python 3.12 (found as scripts/bootstrap.sh finds
it, or OPENJEV_PYTHON) and `uv pip install llm2jev==0.6.1 transformers==5.25.0`, and runs the peer from it.

    .venv/bin/python bench/peer.py                       # R3 and R64, storage full, one run
    .venv/bin/python bench/peer.py --runs 3              # three interleaved runs and their spread
    .venv/bin/python bench/peer.py --store off --workloads R64 --requests 800
    .venv/bin/python bench/peer.py --runs 3 --base /tmp/before   # a checkout of the code before, interleaved
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.server import (  # noqa: E402  (sets up Django for serve's settings)
    burst_cpu_ms,
    cpu_seconds,
    database_for_run,
    fake_calls,
    fake_process_start,
    process_tree,
    serve_fake,
    server_command,
    server_stop,
    settled,
    wait_http,
)
from bench.workloads import WORKLOADS  # noqa: E402
from testbed.load import requests_send  # noqa: E402
from testbed.ports import free_port  # noqa: E402
from testbed.qwen3 import qwen3_dir  # noqa: E402

PEER = "llm2jev==0.6.1"
PEER_PACKAGES = [PEER, "transformers==5.25.0"]
PEER_VENV = ROOT / ".cache" / "peer" / "llm2jev-0.6.1"
SERVED_MODEL = "Qwen/Qwen3.6-35B-A3B"
PATH = "/v1/systemone"


def python_312() -> str:
    """Python 3.12, looked for where scripts/bootstrap.sh looks."""
    home = os.path.expanduser("~")
    candidates = [os.environ.get("OPENJEV_PYTHON", ""), "python3.12"]
    candidates += sorted(glob.glob("/root/.pyenv/versions/3.12*/bin/python3.12"))
    candidates += sorted(glob.glob(f"{home}/.pyenv/versions/3.12*/bin/python3.12"))
    candidates += ["/usr/bin/python3.12", "/usr/local/bin/python3.12"]
    for candidate in filter(None, candidates):
        path = shutil.which(candidate)
        if path and subprocess.run([path, "-c", "import sys; assert sys.version_info[:2] == (3, 12)"]).returncode == 0:
            return path
    raise SystemExit("Python 3.12 was not found; install it or set OPENJEV_PYTHON to its path")


def peer_python() -> Path:
    """The peer's interpreter, its virtual environment made the first time (uv venv + uv pip install)."""
    python = PEER_VENV / "bin" / "python"
    check = [str(python), "-c", "import llm2jev, transformers"]
    if python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return python
    uv = shutil.which("uv") or os.path.expanduser("~/.local/bin/uv")
    if not Path(uv).exists():
        raise SystemExit("uv was not found (scripts/bootstrap.sh installs it)")
    print(f"== making the peer's environment in {PEER_VENV.relative_to(ROOT)}: {' '.join(PEER_PACKAGES)}", flush=True)
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    subprocess.run([uv, "venv", "--quiet", "--python", python_312(), str(PEER_VENV)], check=True, env=env)
    subprocess.run([uv, "pip", "install", "--quiet", "--python", str(python), *PEER_PACKAGES], check=True, env=env)
    subprocess.run(check, check=True)
    return python


def peer_versions(python: Path) -> str:
    code = (
        "from importlib.metadata import version as v; "
        "print(f\"llm2jev {v('llm2jev')}, transformers {v('transformers')}\")"
    )
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.strip()


@dataclass(frozen=True)
class Figures:
    """One server's figures for one workload in one run."""

    cpu_steady: float
    cpu_burst: float
    rate: float
    p50: float
    p99: float
    fake_cpu: float
    calls: float


def answers_check(url: str, name: str) -> int:
    """One request of the workload: it must be a 200 with an answer for every question; their count."""
    body = WORKLOADS[name]
    response = httpx.post(url + PATH, json=body, timeout=60)
    answers = response.json().get("answers") if response.status_code == 200 else None
    if not isinstance(answers, dict) or set(answers) != set(body["questions"]):
        raise SystemExit(f"{url} answered {name} with {response.status_code}: {response.text[:500]}")
    return len(answers)


def workload_measure(
    args: argparse.Namespace, *, url: str, name: str, pids: list[int], fake: subprocess.Popen[str]
) -> Figures:
    body = WORKLOADS[name]
    requests = args.requests if name == "R3" else max(args.requests // 4, 50)
    asyncio.run(requests_send(url=url, body=body, count=64, concurrency=args.concurrency, path=PATH))  # warm
    calls_before, fake_before = fake_calls(fake), cpu_seconds([fake.pid])
    cpu_before, start = cpu_seconds(pids), time.perf_counter()
    results = asyncio.run(requests_send(url=url, body=body, count=requests, concurrency=args.concurrency, path=PATH))
    elapsed, cpu = time.perf_counter() - start, cpu_seconds(pids) - cpu_before
    fake_cpu, calls = cpu_seconds([fake.pid]) - fake_before, fake_calls(fake) - calls_before
    statuses = Counter(status for status, _, _ in results)
    if set(statuses) != {200}:
        raise SystemExit(f"{url} {name}: statuses {dict(statuses)}")
    q = statistics.quantiles([ms for _, _, ms in results], n=100)
    burst = burst_cpu_ms(
        url=url,
        body=body,
        pids=pids,
        size=args.concurrency,
        bursts=max(4, requests // args.concurrency // 2),
        path=PATH,
    )
    return Figures(
        cpu_steady=cpu / requests * 1000,
        cpu_burst=burst,
        rate=requests / elapsed,
        p50=q[49],
        p99=q[98],
        fake_cpu=fake_cpu / requests * 1000,
        calls=calls / requests,
    )


def ours_start(
    *, store: str, port: int, fake_port: int, database_url: str, checkout: Path = ROOT, workers: int = 1
) -> subprocess.Popen[bytes]:
    """`serve` as bench/server.py runs it, on the stand-in at `fake_port` (bench/latency.py too)."""
    env = {
        **os.environ,
        "OPENJEV_TOKENIZER": str(qwen3_dir()),
        "OPENJEV_MODEL": SERVED_MODEL,
        "OPENJEV_STORE_EVALUATIONS": store,
        "OPENJEV_DATABASE_URL": database_url,
        "OPENJEV_SECRET_KEY": "bench-" + "x" * 50,
        "DJANGO_SETTINGS_MODULE": "openjev_site.settings",
        "PYTHONPATH": str(checkout),
    }
    log = (Path(tempfile.mkdtemp(prefix="openjev-peer-")) / "serve.log").open("w")
    command = server_command(server="uvicorn", port=port, fake_port=fake_port, workers=workers)
    return subprocess.Popen(command, cwd=checkout, env=env, stdout=log, stderr=subprocess.STDOUT)


def peer_start(python: Path, *, port: int, fake_port: int) -> subprocess.Popen[bytes]:
    command = [str(python), "-m", "llm2jev", "--model", str(qwen3_dir()), "--backend", "sglang"]
    command += ["--url", f"http://127.0.0.1:{fake_port}", "--host", "127.0.0.1", "--port", str(port)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("PYTHONPATH", None)
    log = (Path(tempfile.mkdtemp(prefix="openjev-peer-")) / "llm2jev.log").open("w")
    return subprocess.Popen(command, cwd=tempfile.gettempdir(), env=env, stdout=log, stderr=subprocess.STDOUT)


def server_measure(
    args: argparse.Namespace, *, which: str, run: int, peer: Path, fake_port: int, fake: subprocess.Popen[str]
) -> dict[str, Figures]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with database_for_run(None) as database_url:
        server = (
            peer_start(peer, port=port, fake_port=fake_port)
            if which == "peer"
            else ours_start(
                store=args.store,
                port=port,
                fake_port=fake_port,
                database_url=database_url,
                checkout=ROOT if which == "ours" else args.base,
            )
        )
        try:
            wait_http(url + "/health")
            settled(pids=process_tree(server.pid))
            pids = process_tree(server.pid)
            figures = {}
            for name in args.workloads:
                answered = answers_check(url, name)
                one = figures[name] = workload_measure(args, url=url, name=name, pids=pids, fake=fake)
                print(
                    f"run {run} {which:4s} {name:4s} {one.rate:6.1f} eval/s  p50 {one.p50:6.1f} ms  "
                    f"p99 {one.p99:6.1f} ms  CPU steady {one.cpu_steady:5.2f} burst {one.cpu_burst:5.2f} ms/eval  "
                    f"stand-in CPU {one.fake_cpu:5.2f} ms/eval  backend calls/eval {one.calls:4.2f}  "
                    f"answers {answered}",
                    flush=True,
                )
            return figures
        finally:
            server_stop(server)


def base_described(base: Path | None) -> str:
    if base is None:
        return ""
    if not (base / "manage.py").is_file():
        raise SystemExit(f"--base {base}: no manage.py there")
    described = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=base, capture_output=True, text=True)
    return f"  base {base} {described.stdout.strip()}".rstrip()


def spread(values: list[float]) -> str:
    return " ".join(f"{v:.2f}" for v in values) + f"  (median {statistics.median(values):.2f})"


def summary(args: argparse.Namespace, runs: list[dict[str, dict[str, Figures]]]) -> None:
    print(f"\n== {len(runs)} run(s), storage {args.store}: server CPU ms per evaluation, then each against the peer")
    for name in args.workloads:
        for kind in ("steady", "burst"):
            peer = [getattr(run["peer"][name], f"cpu_{kind}") for run in runs]
            print(f"{name:4s} {kind:6s} peer {spread(peer)}")
            for which in [w for w in runs[0] if w != "peer"]:
                cpu = [getattr(run[which][name], f"cpu_{kind}") for run in runs]
                ratios = [o / p for o, p in zip(cpu, peer, strict=True)]
                each = " ".join(f"{r:.2f}x" for r in ratios)
                print(
                    f"{'':4s} {kind:6s} {which} {spread(cpu)}  {which}/peer {each}  "
                    f"({min(ratios):.2f}-{max(ratios):.2f}x)"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", choices=list(WORKLOADS), nargs="+", default=list(WORKLOADS))
    parser.add_argument("--store", choices=["off", "full"], default="full", help="our server's storage level")
    parser.add_argument("--runs", type=int, default=1, help="runs, alternating which server goes first")
    parser.add_argument("--requests", type=int, default=600, help="steady-load requests of R3 (R64: a quarter)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--base",
        type=Path,
        help="another checkout of this project (its own code, this checkout's .venv) measured as 'base' in the same "
        "runs, beside ours and the peer: before and after a change, interleaved",
    )
    parser.add_argument("--serve-fake", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_fake:
        serve_fake(args.serve_fake, tokenizer=qwen3_dir(), keep_records=False)
        return
    peer = peer_python()
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True)
    print(
        f"{datetime.date.today()}  ours {commit.stdout.strip()}{base_described(args.base)}  "
        f"peer {peer_versions(peer)}  stand-in fake_sglang "
        f"serving {SERVED_MODEL} (Qwen3 tokenizer)  {os.cpu_count()} cores, load average "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}  storage {args.store}  concurrency {args.concurrency}",
        flush=True,
    )
    fake_port = free_port()
    fake = fake_process_start(port=fake_port, script=Path(__file__))
    runs: list[dict[str, dict[str, Figures]]] = []
    try:
        for run in range(1, args.runs + 1):
            servers = ["ours", "peer"] + (["base"] if args.base else [])
            order = servers if run % 2 else servers[::-1]
            measured = {
                which: server_measure(args, which=which, run=run, peer=peer, fake_port=fake_port, fake=fake)
                for which in order
            }
            figures = {which: measured[which] for which in servers}
            for name in args.workloads:
                theirs = figures["peer"][name]
                for which in [w for w in servers if w != "peer"]:
                    ours = figures[which][name]
                    print(
                        f"run {run} {which}/peer {name:4s} CPU steady {ours.cpu_steady / theirs.cpu_steady:.2f}x  "
                        f"burst {ours.cpu_burst / theirs.cpu_burst:.2f}x",
                        flush=True,
                    )
            runs.append(figures)
    finally:
        fake.terminate()
        fake.wait(10)
    summary(args, runs)


if __name__ == "__main__":
    main()

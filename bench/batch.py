"""A batch against the best client loop at the same backend, and the interactive p99 beside a running batch.

The SGLang stand-in (`fake_sglang`, a process of its own) answers each `/generate` call after a fixed service time,
as a GPU would, burning no CPU for it: `--warm-ms` for a single prompt (the prefix's warm-up), `--batch-ms` for a
batched call (the question branches); it takes any number of calls at once, so what bounds either side is the
service's CPU and its concurrency: 16 evaluations at once, an API process's admission limit
(`OPENJEV_MAX_CONCURRENT_REQUESTS`, beyond which it answers 529) and the batch worker's lines at once
(`OPENJEV_BATCH_CONCURRENCY`, at most that limit). `manage.py serve --connect` runs on a fresh SQLite file with
storage `full` (every answer stored), its batch worker beside it (the `database` engine). The items are `--lines`
bodies of `POST /v1/decisions` (the README's three questions), each input numbered so no two prompts are the same.

Per run, on a fresh server, it prints:

- the client loop: the items sent by the official SDK's `AsyncOpenAI` (`client.post("/decisions")`), `c` at a
  time: first each `c` of `--concurrency` on `--tune-lines` items, then the best of them on the `--lines` items,
  before and after the batch (the load of a shared machine drifts: the batch is held to the mean of the two);
- the batch: the same items as one batch through the SDK (files.create, batches.create, polled every 0.2 s until
  completed); items/s from its creation to its end (upload and validation included), and over its in-progress
  part alone; the ratio to the best client loop (the target: 0.95 or more);
- the interactive p99: `bench/open_loop.py` sending `--rate` decisions/s for `--duration` s, alone and beside a
  batch running at full speed (cancelled after), p50/p99 ms and errors each;

with each measurement's CPU ms per item (the server's processes, this process: the client loop, or the batch's
upload and polling, and the stand-in's) and the load average (`/proc/loadavg`) before and after it. A summary
(each run's figures, their median and spread) ends it.

    .venv/bin/python bench/batch.py --lines 1000 --tune-lines 300 --runs 1 --duration 10    # a quick look
    .venv/bin/python bench/batch.py                     # 10,000 lines, 3 runs: the figures in docs/batch.md
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from openai import AsyncOpenAI, OpenAI

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.batch_server import Cost, Server, loadavg, measured, server_running  # noqa: E402
from bench.server import fake_process_start, serve_fake  # noqa: E402  (sets up Django for the bodies' modules)
from bench.workloads import BODIES  # noqa: E402
from testbed.ports import free_port  # noqa: E402

for _name in ("httpx", "httpx2", "openai"):  # a line per request (Django's logging at INFO) would tax the client
    logging.getLogger(_name).setLevel(logging.WARNING)

BODY = BODIES["decisions"]["R3"]
OPEN_LOOP = Path(__file__).with_name("open_loop.py")
ENDED = ("completed", "failed", "expired", "cancelled")


def bodies_of(count: int, *, offset: int = 0) -> list[dict[str, Any]]:
    return [{**BODY, "input": f"Ticket {offset + i}: {BODY['input']}"} for i in range(count)]


async def client_loop(*, url: str, bodies: list[dict[str, Any]], concurrency: int) -> int:
    """Send every body through `AsyncOpenAI`, `concurrency` at a time; the failures."""
    pending = iter(bodies)
    failures = 0
    async with AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=2, timeout=120) as client:

        async def sender() -> None:
            nonlocal failures
            for body in pending:
                try:
                    await client.post("/decisions", body=body, cast_to=object)
                except Exception:  # counted, and the figure is not given as a result below
                    failures += 1

        await asyncio.gather(*(sender() for _ in range(concurrency)))
    return failures


def batch_started(client: OpenAI, *, bodies: list[dict[str, Any]]) -> str:
    lines = (
        json.dumps({"custom_id": f"line-{i}", "method": "POST", "url": "/v1/decisions", "body": body})
        for i, body in enumerate(bodies)
    )
    uploaded = client.files.create(file=("items.jsonl", "\n".join(lines).encode() + b"\n"), purpose="batch")
    batch = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/decisions", completion_window="24h")  # type: ignore[arg-type]
    return batch.id


def batch_run(*, url: str, bodies: list[dict[str, Any]]) -> tuple[float, float, str]:
    """(seconds from creation to the end, seconds in progress, final status) of one batch of `bodies`."""
    client = OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=2)
    created = time.monotonic()
    batch_id = batch_started(client, bodies=bodies)
    started = None
    while (batch := client.batches.retrieve(batch_id)).status not in ENDED:
        if started is None and batch.status == "in_progress":
            started = time.monotonic()
        time.sleep(0.2)
    ended = time.monotonic()
    return ended - created, ended - (started or created), batch.status


def open_loop(*, url: str, rate: float, duration: float, scratch: Path) -> dict[str, Any]:
    body = scratch / "interactive.json"
    body.write_text(json.dumps(BODY))
    command = [sys.executable, str(OPEN_LOOP), "--url", url, "--body", str(body), "--path", "/v1/decisions"]
    command += ["--rate", str(rate), "--duration", str(duration), "--timeout", "30"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    tally: dict[str, Any] = json.loads(result.stdout)
    return tally


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))] if ordered else float("nan")


def interactive_beside_batch(*, server: Server, args: argparse.Namespace, scratch: Path, lines: int) -> dict[str, Any]:
    """The open loop's figures while a batch of `lines` runs at full speed (started first, cancelled once the loop
    ends)."""
    client = OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=2)
    batch_id = batch_started(client, bodies=bodies_of(lines, offset=10**7))
    while (batch := client.batches.retrieve(batch_id)).request_counts is None or batch.request_counts.completed < 50:
        assert batch.status not in ENDED, batch
        time.sleep(0.2)
    tally = open_loop(url=server.url, rate=args.rate, duration=args.duration, scratch=scratch)
    still_running = client.batches.retrieve(batch_id).status == "in_progress"
    client.batches.cancel(batch_id)
    while client.batches.retrieve(batch_id).status not in ENDED:
        time.sleep(0.2)
    return tally | {"batch_ran_throughout": still_running}


def p99_line(name: str, tally: dict[str, Any]) -> str:
    latencies = tally["latencies_ms"]
    p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
    note = "" if tally.get("batch_ran_throughout", True) else " (the batch ended before the load did)"
    answered = f"{len(latencies)} answered, {tally['errors']} errors"
    return f"  interactive {name}: p50 {p50:.0f} ms, p99 {p99:.0f} ms, {answered}{note}"


def client_measured(*, server: Server, lines: int, concurrency: int, offset: int) -> float:
    """Items/s of the client loop over `lines` items (0 when any failed), printed with its cost."""
    costs: list[Cost] = []
    with measured(server, costs):
        failures = asyncio.run(
            client_loop(url=server.url, bodies=bodies_of(lines, offset=offset), concurrency=concurrency)
        )
    rate = lines / costs[0].seconds
    print(
        f"  client loop, {lines} items, concurrency {concurrency}: {rate:.1f} items/s, {failures} failures; "
        f"{costs[0].line(items=lines)}",
        flush=True,
    )
    return rate if failures == 0 else 0.0


def batch_measured(*, server: Server, lines: int, figures: dict[str, Any]) -> None:
    costs: list[Cost] = []
    with measured(server, costs):
        total, in_progress, status = batch_run(url=server.url, bodies=bodies_of(lines, offset=10**6))
    figures["batch"] = lines / total if status == "completed" else 0.0
    figures["batch_in_progress"] = lines / in_progress
    print(
        f"  batch of {lines} lines: {status}, {figures['batch']:.1f} items/s from creation to end ({total:.1f} s), "
        f"{figures['batch_in_progress']:.1f} in progress; {costs[0].line(items=lines)}",
        flush=True,
    )


def run_once(*, args: argparse.Namespace, fake_port: int, fake_pid: int) -> dict[str, Any]:
    """One run on a fresh server: the client loop's concurrency tuned on `--tune-lines` items, then the batch
    between two runs of the best client loop on the same items (the load of a shared machine drifts: the batch is
    held to the mean of the two), then the interactive p99 alone and beside a batch."""
    figures: dict[str, Any] = {}
    scratch = Path(tempfile.mkdtemp(prefix="openjev-batch-run-"))
    with server_running(fake_port=fake_port, fake_pid=fake_pid, batch_concurrency=args.batch_concurrency) as server:
        asyncio.run(client_loop(url=server.url, bodies=bodies_of(200, offset=10**8), concurrency=16))  # warm-up
        tuned = {
            c: client_measured(server=server, lines=args.tune_lines, concurrency=c, offset=10**7)
            for c in args.concurrency
        }
        best = max(tuned, key=lambda c: tuned[c])
        before = client_measured(server=server, lines=args.lines, concurrency=best, offset=0)
        batch_measured(server=server, lines=args.lines, figures=figures)
        after = client_measured(server=server, lines=args.lines, concurrency=best, offset=0)
        figures |= {"tuned": tuned, "best": best, "client_before": before, "client_after": after}
        figures["ratio"] = figures["batch"] / statistics.mean([before, after])
        print(f"  batch / best client loop (concurrency {best}, the mean of the two): {figures['ratio']:.3f}")
        alone = open_loop(url=server.url, rate=args.rate, duration=args.duration, scratch=scratch)
        print(p99_line("alone", alone), flush=True)
        lines = max(args.lines, int(figures["batch_in_progress"] * (args.duration + 15)))  # outlasts the load
        beside = interactive_beside_batch(server=server, args=args, scratch=scratch, lines=lines)
        print(p99_line("beside a batch", beside), flush=True)
        figures["p99_alone"] = percentile(alone["latencies_ms"], 99)
        figures["p99_beside"] = percentile(beside["latencies_ms"], 99)
    return figures


def spread(name: str, values: list[float], unit: str) -> str:
    each = ", ".join(f"{v:.3g}" for v in values)
    middle = statistics.median(values)
    return f"{name}: {each} {unit} (median {middle:.3g}, range {min(values):.3g}-{max(values):.3g})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=10_000, help="items in the batch and in each client loop")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 12, 16], help="the client loop's, tried")
    parser.add_argument("--tune-lines", type=int, default=2000, help="items the client loop is tuned on")
    parser.add_argument("--batch-concurrency", type=int, default=16, help="OPENJEV_BATCH_CONCURRENCY")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warm-ms", type=float, default=15.0, help="the stand-in's service time for one prompt")
    parser.add_argument("--batch-ms", type=float, default=10.0, help="its service time for a batched call")
    parser.add_argument("--rate", type=float, default=10.0, help="interactive decisions/s beside the batch")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of interactive load")
    parser.add_argument("--serve-fake", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_fake:
        serve_fake(args.serve_fake, keep_records=False, delay=args.warm_ms / 1000, batch_delay=args.batch_ms / 1000)
        return
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True)
    print(
        f"{datetime.datetime.now():%Y-%m-%d %H:%M}  {commit.stdout.strip()}  {args.lines} lines  stand-in "
        f"{args.warm_ms:g} ms warm-up / {args.batch_ms:g} ms batch  OPENJEV_BATCH_CONCURRENCY "
        f"{args.batch_concurrency}  {os.cpu_count()} cores, load {loadavg()}",
        flush=True,
    )
    fake_port = free_port()
    options = ["--warm-ms", str(args.warm_ms), "--batch-ms", str(args.batch_ms)]
    fake = fake_process_start(port=fake_port, script=Path(__file__), options=options)
    runs = []
    try:
        for number in range(1, args.runs + 1):
            print(f"run {number}", flush=True)
            runs.append(run_once(args=args, fake_port=fake_port, fake_pid=fake.pid))
    finally:
        fake.terminate()
        fake.wait(10)
    print("summary", flush=True)
    for concurrency in args.concurrency:
        tuned = [r["tuned"][concurrency] for r in runs]
        print("  " + spread(f"client loop c={concurrency} ({args.tune_lines} items)", tuned, "items/s"))
    print(f"  best concurrency: {', '.join(str(r['best']) for r in runs)}")
    client = [statistics.mean([r["client_before"], r["client_after"]]) for r in runs]
    print("  " + spread(f"best client loop ({args.lines} items, mean of two)", client, "items/s"))
    print("  " + spread(f"batch ({args.lines} lines)", [r["batch"] for r in runs], "items/s"))
    print("  " + spread("batch / best client loop", [r["ratio"] for r in runs], ""))
    print("  " + spread("interactive p99 alone", [r["p99_alone"] for r in runs], "ms"))
    print("  " + spread("interactive p99 beside a batch", [r["p99_beside"] for r in runs], "ms"))


if __name__ == "__main__":
    main()

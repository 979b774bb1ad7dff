"""An open-loop load generator, run by `bench/latency.py` in a process of its own (so that its CPU is neither the
server's nor the stand-in's, and is reported): evaluations arrive as a Poisson process at `--rate` per second
for `--duration` seconds, each sent when it is due whether or not the earlier ones have answered, so a slow
server meets the same arrivals as a fast one (a closed loop would slow its clients down with it).

Each evaluation is either one request to the service (`--mode service`: the body at `--body`, posted to
`--path`), or the raw client (`--mode raw`): the `/generate` calls the service makes for that body, one after
the other as the service makes them, sent straight to the backend (the bodies captured from the service, in a
JSON list at `--body`, each given its own `rid`). Latency is counted from when the evaluation was due, not from
when it was sent: a generator that falls behind adds its lag to what it reports instead of hiding it.

It prints one JSON object: each answered evaluation's latency in ms, the errors (a status that is not 200, a
refused or reset connection, a timeout), the statuses, its own CPU seconds, and its worst lateness in sending.

    .venv/bin/python bench/open_loop.py --url http://127.0.0.1:8000 --body body.json --rate 50 --duration 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

JSON_HEADERS = {"Content-Type": "application/json"}
RID_PLACEHOLDER = "__bench_rid__"


@dataclass
class Tally:
    """What the evaluations did: latencies of the answered ones, statuses of all, the worst send lateness."""

    latencies_ms: list[float] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    late_ms: float = 0.0


def raw_templates(*, bodies: list[dict[str, Any]]) -> list[bytes]:
    """The captured bodies serialised once, their `rid` a placeholder each evaluation replaces."""
    return [orjson.dumps({**body, "rid": RID_PLACEHOLDER}) for body in bodies]


async def service_evaluate(*, session: aiohttp.ClientSession, url: str, payload: bytes, index: int) -> str:
    async with session.post(url, data=payload, headers=JSON_HEADERS) as response:
        await response.read()
        return str(response.status)


async def raw_evaluate(*, session: aiohttp.ClientSession, url: str, templates: list[bytes], index: int) -> str:
    """The service's `/generate` calls in its order, each waiting for the one before (the warm-up, then the
    branches)."""
    for step, template in enumerate(templates):
        payload = template.replace(RID_PLACEHOLDER.encode(), f"raw-{index}-{step}".encode())
        async with session.post(url, data=payload, headers=JSON_HEADERS) as response:
            await response.read()
            if response.status != 200:
                return str(response.status)
    return "200"


async def evaluation_timed(*, tally: Tally, due: float, send: Any, index: int) -> None:
    try:
        status = await send(index=index)
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        status = type(exc).__name__
    if status == "200":
        tally.latencies_ms.append((time.perf_counter() - due) * 1000)
    tally.statuses[status] += 1


async def arrivals_run(*, args: argparse.Namespace, tally: Tally) -> None:
    """Poisson arrivals at `args.rate` for `args.duration` s, each evaluation a task of its own."""
    body = json.loads(Path(args.body).read_text())
    timeout = aiohttp.ClientTimeout(total=args.timeout)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout) as session:
        if args.mode == "raw":
            templates, url = raw_templates(bodies=body), args.url + "/generate"

            async def send(*, index: int) -> str:
                return await raw_evaluate(session=session, url=url, templates=templates, index=index)
        else:
            payload, url = orjson.dumps(body), args.url + args.path

            async def send(*, index: int) -> str:
                return await service_evaluate(session=session, url=url, payload=payload, index=index)

        arrivals, tasks = random.Random(args.seed), []
        start = due = time.perf_counter()
        for index in range(10**9):
            due += arrivals.expovariate(args.rate)
            if due - start >= args.duration:
                break
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            tally.late_ms = max(tally.late_ms, (time.perf_counter() - due) * 1000)
            tasks.append(asyncio.create_task(evaluation_timed(tally=tally, due=due, send=send, index=index)))
        await asyncio.gather(*tasks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True, help="the service's base URL, or the backend's with --mode raw")
    parser.add_argument("--body", required=True, help="a JSON file: the request body, or the raw client's list")
    parser.add_argument("--mode", choices=["service", "raw"], default="service")
    parser.add_argument("--path", default="/v1/systemone")
    parser.add_argument("--rate", type=float, default=50.0, help="evaluations per second (Poisson)")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of arrivals")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds an evaluation may take")
    args = parser.parse_args()
    import uvloop  # the generator's own overhead as small as it goes: it is in every figure

    tally = Tally()
    asyncio.run(arrivals_run(args=args, tally=tally), loop_factory=uvloop.new_event_loop)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    json.dump(
        {
            "latencies_ms": tally.latencies_ms,
            "statuses": dict(tally.statuses),
            "errors": sum(n for status, n in tally.statuses.items() if status != "200"),
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "late_ms": tally.late_ms,
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()

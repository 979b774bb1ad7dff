"""A public deployment's robustness, checked as an operator deploys it: `manage.py serve --workers 2` on the SGLang
stand-in, auth on with keys issued in the database, per-key limits counted in Redis. Five checks, each printed with
what it measured and the bound it is held to:

1. hostile: the three classes of request that once held the event loop for seconds (500 image URLs that end in a
   space, 20,000 asset placeholders, WebSocket upgrades on a path of 8,100 slashes, `bench/hostile.py`) each stall
   `GET /health/live` under 0.5 s (its worst probe while the request is in flight);
2. tokens: 12 concurrent 3-question requests over a long state from a key of 20,000 input tokens per minute are
   answered only up to 20,000 input tokens;
3. invalid: a key of 5 requests per minute that sends 10 invalid requests gets at least 4 × 429;
4. echo: a 1 MB unknown field gets a 400 of under 16 KB;
5. worker: after one worker's SIGKILL, at least 90 % of the requests over the next 10 s are answered, and `/health`
   reports two workers up again within 20 s.

    .venv/bin/python bench/robustness.py

Each check prints `ok` or `FAILED`; the script exits 1 when one failed.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openjev_site.settings")

import django  # noqa: E402

django.setup()

from api.systemone.examples import README_REQUEST  # noqa: E402
from bench.hostile import ATTACKS, KEY, REDIS_URL, Probe, Target, server_start  # noqa: E402
from bench.server import database_for_run, fake_process_start, keys_launch, keys_read, process_tree  # noqa: E402
from testbed.ports import free_port  # noqa: E402

TOKENS_PER_MINUTE = 20_000
REQUESTS_PER_MINUTE = 5
LONG_STATE = " ".join(f"Line {i}: the parcel for order {4400 + i} is late and the invoice is wrong." for i in range(60))


@dataclass(frozen=True)
class Check:
    name: str
    measured: str
    held: bool


def _evaluation(state: str | None = None) -> bytes:
    """The README's request (three questions), on a state of its own where one is given."""
    return json.dumps({**README_REQUEST, **({} if state is None else {"state": state})}).encode()


def _post(url: str, body: bytes, *, key: str, path: str = "/v1/systemone", timeout: float = 60) -> httpx.Response:
    return httpx.post(
        url + path,
        content=body,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
        timeout=timeout,
    )


def hostile_checks(url: str) -> list[Check]:
    probe = Probe(url)
    probe.thread.start()
    checks = []
    try:
        for name in ("image_urls", "assets", "slash_path_websocket"):
            sent, latencies = probe.measure(functools.partial(ATTACKS[name], Target(url=url)))
            worst = max(latencies, default=float("nan"))
            checks.append(Check(f"hostile {name}", f"status {sent.status}, worst stall {worst:.1f} ms", worst < 500))
    finally:
        probe.stopped.set()
    return checks


def tokens_check(url: str, key: str) -> Check:
    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda _: _post(url, _evaluation(LONG_STATE), key=key), range(12)))
    answered = [a for a in answers if a.status_code == 200]
    read = sum(a.json()["usage"]["input_tokens"] for a in answered)
    statuses = sorted(a.status_code for a in answers)
    measured = f"{len(answered)} of 12 answered, {read:,} input tokens (statuses {statuses})"
    return Check("tokens", measured, read <= TOKENS_PER_MINUTE and 0 < len(answered) < 12)


def invalid_check(url: str, key: str) -> Check:
    body = json.dumps({"model": "jev-latest", "questions": {"q": {"type": "unknown"}}, "state": "x"}).encode()
    statuses = [_post(url, body, key=key).status_code for _ in range(10)]
    refused = statuses.count(429)
    return Check("invalid", f"statuses {statuses}: {refused} × 429", refused >= 4)


def echo_check(url: str) -> Check:
    body = {"model": "jev-latest", "input": "x", "questions": [{"type": "predicate"}], "x" * 1_000_000: 1}
    answer = _post(url, json.dumps(body).encode(), key=KEY, path="/v1/decisions")
    size = len(answer.content)
    return Check("echo", f"status {answer.status_code}, {size:,} bytes", answer.status_code == 400 and size < 16_384)


def _health(url: str) -> dict[str, Any] | None:
    try:
        return dict(httpx.get(url + "/health", headers={"Authorization": f"Bearer {KEY}"}, timeout=5).json())
    except (httpx.HTTPError, ValueError):
        return None


def worker_check(url: str, serve: subprocess.Popen[bytes]) -> Check:
    killed = process_tree(serve.pid)[1]
    outcomes: list[int | str] = []
    back_after: list[float] = []
    start = time.perf_counter()

    def send() -> None:  # ten requests a second, each on a new connection (the kernel picks the worker)
        with ThreadPoolExecutor(8) as pool:
            futures = []
            while (elapsed := time.perf_counter() - start) < 10:
                futures.append(pool.submit(_one))
                time.sleep(max(0.0, 0.1 * len(futures) - elapsed))
            for future in futures:
                outcomes.append(future.result())

    def _one() -> int | str:
        try:
            return _post(url, _evaluation(), key=KEY, timeout=10).status_code
        except httpx.HTTPError as exc:
            return type(exc).__name__

    def watch() -> None:
        pids: set[int] = set()
        while time.perf_counter() - start < 20:
            health = _health(url)
            if health is not None and health.get("worker_pid", killed) != killed:
                pids.add(int(health["worker_pid"]))
                if len(pids) >= 2 and health.get("workers", {}).get("up") == 2:
                    back_after.append(time.perf_counter() - start)
                    return
            time.sleep(0.05)

    os.kill(killed, signal.SIGKILL)
    threads = [threading.Thread(target=send), threading.Thread(target=watch)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    answered = sum(1 for o in outcomes if isinstance(o, int))
    share = answered / len(outcomes)
    back = f"two workers up again after {back_after[0]:.1f} s" if back_after else "two workers not up within 20 s"
    unanswered = sorted({str(o) for o in outcomes if not isinstance(o, int)})
    measured = (
        f"{answered} of {len(outcomes)} answered ({share:.0%}; {', '.join(unanswered) or 'none unanswered'}); {back}"
    )
    return Check("worker", measured, share >= 0.9 and bool(back_after) and serve.poll() is None)


def workers_wait(url: str) -> None:
    """Until `/health` reports both workers up (serve answers once the first one listens)."""
    while (_health(url) or {}).get("workers", {}).get("up") != 2:
        time.sleep(0.1)


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()  # the counts of an earlier run
    fake_port = free_port()
    fake = fake_process_start(port=fake_port)
    log_path = Path(tempfile.mkdtemp(prefix="openjev-robustness-")) / "serve.log"
    checks: list[Check] = []
    with database_for_run(None) as database_url, log_path.open("w") as log:
        limits = {
            "tokens": {"tokens_per_minute": TOKENS_PER_MINUTE},
            "requests": {"requests_per_minute": REQUESTS_PER_MINUTE},
        }
        keys = keys_read(keys_launch(database_url=database_url, limits=limits, owner="bench/robustness.py"))
        url, server = server_start(
            workers=2,
            redis=True,
            requests_per_minute=100_000,
            fake_port=fake_port,
            database_url=database_url,
            log=log,
        )
        workers_wait(url)
        try:
            print("serve --workers 2 on the SGLang stand-in, auth on, per-key limits in Redis")
            checks += hostile_checks(url)
            checks.append(tokens_check(url, keys["tokens"]))
            checks.append(invalid_check(url, keys["requests"]))
            checks.append(echo_check(url))
            checks.append(worker_check(url, server))
        finally:
            server.terminate()
            server.wait(timeout=60)
            fake.terminate()
            fake.wait(timeout=30)
    for check in checks:
        print(f"{check.name:<30} {'ok' if check.held else 'FAILED':<7} {check.measured}")
    print(f"server log: {log_path}")
    sys.exit(0 if all(check.held for check in checks) else 1)


if __name__ == "__main__":
    main()

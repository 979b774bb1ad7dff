"""Hostile input against the event loop: each class of request an attacker can send, timed by how long it
stalls `GET /health/live` while the server works on it.

The server is `manage.py serve` as deployed, on the SGLang stand-in in another process, with auth on (a key in
`OPENJEV_API_KEY`, and wrong keys for the throttle), per-key limits counted in Redis and one worker by default
(so every probe meets the worker the hostile request is on). A thread probes `/health/live` every few
milliseconds on its own connection while the hostile request is in flight; the worst probe's latency is the
loop's worst stall for that class (the spec's target: under 100 ms, each class).

    .venv/bin/python bench/hostile.py                           # every class, once
    .venv/bin/python bench/hostile.py --classes image_urls assets --repeat 3
    .venv/bin/python bench/hostile.py --workers 2 --no-redis    # as `serve --workers 2`, limits in each process

It prints, per class: what was sent (bytes), the status the client got, the request's seconds, and the
probes' p50 and worst latency (ms) while it was in flight.
"""

from __future__ import annotations

import argparse
import base64
import functools
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx
import zstandard

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openjev_site.settings")

import django  # noqa: E402

django.setup()

from bench.server import database_for_run, fake_process_start, wait_http  # noqa: E402
from testbed.ports import free_port  # noqa: E402
from testbed.qwen3 import qwen3_dir  # noqa: E402

KEY = "hostile-bench-key-" + "k" * 24
REDIS_URL = "redis://127.0.0.1:6379/3"
PROBE_INTERVAL = 0.005
QUESTION = {"q": {"type": "noul", "instructions": "x"}}


@dataclass(frozen=True)
class Sent:
    status: int | str
    size: int
    seconds: float


Attack = Callable[[str], Sent]
"""Sends one hostile request to the server at the URL; returns what the client saw."""


def _post(url: str, path: str, body: bytes, headers: dict[str, str] | None = None) -> Sent:
    start = time.perf_counter()
    try:
        response = httpx.post(
            url + path,
            content=body,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}", **(headers or {})},
            timeout=600,
        )
        status: int | str = response.status_code
        size = len(response.content)
    except httpx.HTTPError as exc:
        status, size = type(exc).__name__, 0
    del size
    return Sent(status=status, size=len(body), seconds=time.perf_counter() - start)


def _systemone(state: Any, **extra: Any) -> bytes:
    return json.dumps({"model": "jev-latest", "questions": QUESTION, "state": state, **extra}).encode()


def image_urls(url: str) -> Sent:
    """The review's repro: 500 URLs of 4,096 characters that end in a space (2 MB)."""
    return _post(url, "/v1/systemone", _systemone({"text": "x", "images": ["http://" + "a" * 4088 + " "] * 500}))


def assets(url: str) -> Sent:
    """20,000 asset placeholders over a 200,000-character state made of their common beginning."""
    pixel = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 8).decode()
    placeholders = {f"ph{i:05d}": {"type": "image", "format": "png", "data_base64": pixel} for i in range(20_000)}
    return _post(url, "/v1/systemone", _systemone("ph0" * 66_667, assets=placeholders))


def transcript(url: str) -> Sent:
    """A chat transcript of 60,000 one-character messages (2 MB)."""
    return _post(url, "/v1/systemone", _systemone([{"role": "user", "content": "a"}] * 60_000))


def wide_object(url: str) -> Sent:
    """A state object of 110,000 keys."""
    return _post(url, "/v1/systemone", _systemone({f"k{i}": i for i in range(110_000)}))


def surrogates(url: str) -> Sent:
    """150,000 lone surrogates, each a problem to locate."""
    return _post(url, "/v1/systemone", _systemone(["\ud800"] * 150_000))


def deep_nesting(url: str) -> Sent:
    """A state of 1,000,000 nested arrays (2 MB of brackets): over the nesting limit at the 129th."""
    body = b'{"model": "jev-latest", "questions": {"q": {"type": "noul", "instructions": "x"}}, "state": '
    return _post(url, "/v1/systemone", body + b"[" * 1_000_000 + b"]" * 1_000_000 + b"}")


def decisions_input(url: str) -> Sent:
    """OpenAI's input as 60,000 message items."""
    body = {
        "model": "jev-latest",
        "input": [{"role": "user", "content": "a"}] * 60_000,
        "questions": [{"type": "predicate", "instructions": "x"}],
    }
    return _post(url, "/v1/decisions", json.dumps(body).encode())


def unknown_field(url: str) -> Sent:
    """A 1 MB unknown field on `/v1/decisions`, which the error names."""
    body = {"model": "jev-latest", "input": "x", "questions": [{"type": "predicate"}], "x" * 1_000_000: 1}
    return _post(url, "/v1/decisions", json.dumps(body).encode())


def multipart_parts(url: str) -> Sent:
    """A multipart body of 200,000 empty parts."""
    boundary = "b"
    part = f'--{boundary}\r\nContent-Disposition: form-data; name="p"\r\n\r\n\r\n'
    body = f'--{boundary}\r\nContent-Disposition: form-data; name="request"\r\n\r\n{{}}\r\n' + part * 30_000
    body += f"--{boundary}--\r\n"
    return _post(
        url, "/v1/systemone", body.encode(), headers={"Content-Type": f"multipart/form-data; boundary={boundary}"}
    )


def zstd_body(url: str) -> Sent:
    """The image-URL repro compressed with zstd (what the official SDK sends)."""
    raw = _systemone({"text": "x", "images": ["http://" + "a" * 4088 + " "] * 400})
    return _post(url, "/v1/systemone", zstandard.ZstdCompressor().compress(raw), headers={"Content-Encoding": "zstd"})


def long_header(url: str) -> Sent:
    """A 60 KB Authorization header of repeated `Bearer ` words."""
    start = time.perf_counter()
    try:
        response = httpx.get(url + "/v1/models", headers={"Authorization": ("Bearer " * 8_000).strip()}, timeout=600)
        status: int | str = response.status_code
    except httpx.HTTPError as exc:
        status = type(exc).__name__
    return Sent(status=status, size=8_000 * 7, seconds=time.perf_counter() - start)


def slash_path_websocket(url: str) -> Sent:
    """WebSocket upgrades on a path of 8,100 slashes (the access log's redaction), four at once."""
    host, port = url.removeprefix("http://").split(":")
    request = (
        f"GET /{'/' * 8100} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    ).encode()
    start = time.perf_counter()
    statuses: list[str] = []

    def upgrade() -> None:
        with socket.create_connection((host, int(port)), timeout=600) as sock:
            sock.sendall(request)
            statuses.append(sock.recv(64).split(b"\r\n")[0].decode(errors="replace")[9:12])

    threads = [threading.Thread(target=upgrade) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return Sent(status=",".join(sorted(set(statuses))), size=len(request) * 4, seconds=time.perf_counter() - start)


def stream_message(url: str) -> Sent:
    """The image-URL repro as one message on `/v1/systemone/stream`."""
    from websockets.sync.client import connect

    message = json.dumps(
        {
            "id": 1,
            "model": "jev-latest",
            "questions": QUESTION,
            "state": {"images": ["http://" + "a" * 4088 + " "] * 400},
        }
    )
    start = time.perf_counter()
    with connect(
        url.replace("http", "ws") + "/v1/systemone/stream",
        additional_headers={"Authorization": f"Bearer {KEY}"},
        max_size=None,
        open_timeout=600,
        ping_interval=None,  # a stalled server cannot answer pings: the stall is what is measured
    ) as socket_:
        socket_.send(message)
        reply = json.loads(socket_.recv(timeout=600))
    return Sent(status=reply.get("status", reply["type"]), size=len(message), seconds=time.perf_counter() - start)


def wrong_keys(url: str) -> Sent:
    """300 wrong keys from one address, one after another (the throttle's 429 must come, quickly)."""
    start = time.perf_counter()
    statuses: dict[int, int] = {}
    with httpx.Client(base_url=url, timeout=600) as client:
        for i in range(300):
            code = client.get("/v1/models", headers={"Authorization": f"Bearer wrong-{i}-" + "w" * 30}).status_code
            statuses[code] = statuses.get(code, 0) + 1
    shown = "/".join(f"{n}x{code}" for code, n in sorted(statuses.items()))
    return Sent(status=shown, size=300, seconds=time.perf_counter() - start)


ATTACKS: dict[str, Attack] = {
    "image_urls": image_urls,
    "assets": assets,
    "transcript": transcript,
    "wide_object": wide_object,
    "surrogates": surrogates,
    "deep_nesting": deep_nesting,
    "decisions_input": decisions_input,
    "unknown_field": unknown_field,
    "multipart_parts": multipart_parts,
    "zstd_body": zstd_body,
    "long_header": long_header,
    "slash_path_websocket": slash_path_websocket,
    "stream_message": stream_message,
    "wrong_keys": wrong_keys,
}


class Probe:
    """`GET /health/live` in a loop on its own connection; the latencies seen while `recording`."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.latencies: list[float] = []
        self.recording = False
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=600) as client:
            while not self.stopped.is_set():
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--classes", nargs="+", choices=sorted(ATTACKS), default=list(ATTACKS))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--no-redis", action="store_true", help="count the per-key limits in each process")
    parser.add_argument(
        "--requests-per-minute", type=int, default=100_000, help="the key's request limit (low: a key over it)"
    )
    args = parser.parse_args()
    if not args.no_redis:
        import redis

        redis.Redis.from_url(REDIS_URL).flushdb()
    fake_port = free_port()
    fake = fake_process_start(port=fake_port)
    log_path = Path(tempfile.mkdtemp(prefix="openjev-hostile-")) / "serve.log"
    with database_for_run(None) as database_url, log_path.open("w") as log:
        url, server = server_start(
            workers=args.workers,
            redis=not args.no_redis,
            requests_per_minute=args.requests_per_minute,
            fake_port=fake_port,
            database_url=database_url,
            log=log,
        )
        probe = Probe(url)
        probe.thread.start()
        try:
            print(f"serve --workers {args.workers}, auth on, limits in {'each process' if args.no_redis else 'Redis'}")
            print(f"{'class':<22} {'bytes':>9} {'status':>14} {'request s':>10} {'probe p50 ms':>13} {'worst ms':>9}")
            for name in args.classes:
                for _ in range(args.repeat):
                    sent, latencies = probe.measure(functools.partial(ATTACKS[name], url))
                    p50 = statistics.median(latencies) if latencies else float("nan")
                    worst = max(latencies) if latencies else float("nan")
                    print(
                        f"{name:<22} {sent.size:>9} {sent.status!s:>14} {sent.seconds:>10.2f}"
                        f" {p50:>13.1f} {worst:>9.1f}",
                        flush=True,
                    )
        finally:
            probe.stopped.set()
            server.terminate()
            server.wait(timeout=60)
            fake.terminate()
            fake.wait(timeout=30)
    print(f"server log: {log_path}")


if __name__ == "__main__":
    main()

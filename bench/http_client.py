"""The SGLang client's HTTP stack: client CPU per `/generate` call against the fake SGLang in another
process, at the concurrency of 16 evaluations in flight.

    .venv/bin/python bench/http_client.py                 # 3000 calls per stack, twice, interleaved
    .venv/bin/python bench/http_client.py --calls 10000 --rounds 3

Stacks: httpx on its own pool (httpcore: each request polls every idle connection's socket, and h11
parses in Python), httpx on aiohttp's pool through `httpx_aiohttp.AiohttpTransport` by `client.post` (the
backend's client until issue 42), aiohttp as the backend sends (`LoopHttp`: its URL, headers and timeouts
built once per session), and aiohttp's `session.post` with a string URL and no timeouts (the floor).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import httpx
import uvloop
from httpx_aiohttp import AiohttpTransport

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.server import fake_process_start  # noqa: E402
from inference.backends.sglang_http import LoopHttp  # noqa: E402
from testbed.ports import free_port  # noqa: E402

BODY = json.dumps(
    {
        "input_ids": list(range(1000, 1300)),
        "sampling_params": {"max_new_tokens": 1, "temperature": 0.0},
        "return_logprob": True,
        "token_ids_logprob": [15, 16, 17],
        "logprob_start_len": -1,
        "rid": "bench",
    }
).encode()
HEADERS = {"Content-Type": "application/json"}
STACKS = ("httpx", "httpx+aiohttp", "aiohttp, as the backend", "aiohttp")

Post = Callable[[], Awaitable[int]]


def _httpx_post(client: httpx.AsyncClient) -> Post:
    async def post() -> int:
        response = await client.post("/generate", content=BODY, headers=HEADERS)
        return response.status_code

    return post


def _backend_post(http: LoopHttp) -> Post:
    async def post() -> int:
        async with http.session.post(
            http.generate_url, data=BODY, headers=http.generate_headers(), timeout=http.timeout
        ) as response:
            await response.read()
            return response.status

    return post


def _aiohttp_post(session: aiohttp.ClientSession, url: str) -> Post:
    async def post() -> int:
        async with session.post(url + "/generate", data=BODY, headers=HEADERS) as response:
            await response.read()
            return response.status

    return post


async def _calls(post: Post, *, calls: int, concurrency: int) -> None:
    remaining = iter(range(calls))

    async def worker() -> None:
        for _ in remaining:
            status = await post()
            if status != 200:
                raise RuntimeError(f"the fake answered {status}")

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def stack_measure(*, stack: str, url: str, calls: int, concurrency: int) -> tuple[float, float]:
    """(client CPU µs per call, calls/s), after one warm-up pass."""
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    if stack.startswith("aiohttp"):
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64))
        backend = LoopHttp.of(session=session, url=url, api_key=None, timeout=120.0)
        post = _aiohttp_post(session, url) if stack == "aiohttp" else _backend_post(backend)
        close = session.close
    else:
        transport = (
            AiohttpTransport(client=aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)))
            if stack == "httpx+aiohttp"
            else None
        )
        client = httpx.AsyncClient(base_url=url, limits=limits, transport=transport)
        post, close = _httpx_post(client), client.aclose
    try:
        await _calls(post, calls=calls, concurrency=concurrency)
        cpu, wall = time.process_time(), time.perf_counter()
        await _calls(post, calls=calls, concurrency=concurrency)
        return (time.process_time() - cpu) / calls * 1e6, calls / (time.perf_counter() - wall)
    finally:
        await close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    port = free_port()
    fake = fake_process_start(port=port)
    try:
        for _ in range(args.rounds):
            for stack in STACKS:
                cpu_us, rate = uvloop.run(
                    stack_measure(
                        stack=stack, url=f"http://127.0.0.1:{port}", calls=args.calls, concurrency=args.concurrency
                    )
                )
                print(f"{stack:26s} {cpu_us:7.1f} µs client CPU per call  {rate:7.0f} calls/s", flush=True)
    finally:
        fake.terminate()
        fake.wait(10)


if __name__ == "__main__":
    main()

"""Concurrent evaluation requests (`POST /v1/systemone` or another route) against a running server, for load
checks and benchmarks."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx


async def requests_send(
    *, url: str, body: dict[str, Any], count: int, concurrency: int, path: str = "/v1/systemone"
) -> list[tuple[int, str | None, float]]:
    """(status, request id, latency ms) per request, `concurrency` requests in flight at a time."""
    results: list[tuple[int, str | None, float]] = []
    next_index = iter(range(count))
    payload = json.dumps(body).encode()  # once: the client's own work must not crowd the server's CPU
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:

        async def worker() -> None:
            for _ in next_index:
                start = time.perf_counter()
                response = await client.post(path, content=payload, headers={"Content-Type": "application/json"})
                latency = (time.perf_counter() - start) * 1000.0
                results.append((response.status_code, response.headers.get("x-typesafe-request-id"), latency))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results

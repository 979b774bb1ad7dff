"""What the fake records, its concurrency, and the fake as a standalone process."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import httpx

from fake_sglang import FakeSGLang, RequestRecord, fake_logprob
from testbed.ports import free_port
from tests.fake_sglang.helpers import PREFIX, batch_body, body, label_logprobs

REPO_ROOT = Path(__file__).resolve().parents[2]


# ---- records and concurrency --------------------------------------------------------------------


async def warm_then_branches(url: str, branches: int) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        assert (await http.post("/generate", json=body(PREFIX, [1], rid="warm"))).status_code == 200
        replies = await asyncio.gather(
            *(http.post("/generate", json=body([*PREFIX, i], [1], rid=f"b{i}")) for i in range(branches))
        )
        assert all(r.status_code == 200 for r in replies)


def test_records_show_the_warm_up_ending_before_branches_start(fake: FakeSGLang) -> None:
    fake.delay = 0.2
    asyncio.run(warm_then_branches(fake.url, 6))
    warm, *branches = fake.requests
    assert warm["body"]["rid"] == "warm" and warm["t_end"] is not None
    assert all(warm["t_end"] < b["t_start"] for b in branches)
    assert all(b["path"] == "/generate" and b["status"] == 200 for b in fake.requests)
    assert fake.max_in_flight == 6 and fake.in_flight == 0 and fake.generate_calls == 7


def test_records_can_be_switched_off_for_long_benchmarks() -> None:
    with FakeSGLang(keep_records=False) as quiet, httpx.Client(base_url=quiet.url) as http:
        http.post("/generate", json=body(PREFIX, [1]))
        assert quiet.requests == [] and quiet.generate_calls == 1


def test_a_batched_call_counts_as_one_in_flight(fake: FakeSGLang, client: httpx.Client) -> None:
    fake.delay = 0.05
    client.post("/generate", json=batch_body([[1], [2], [3]], [[1], [1], [1]], ["a", "b", "c"]))
    assert fake.max_in_flight == 1 and len(fake.requests) == 1


def call_seconds(record: RequestRecord) -> float:
    end = record["t_end"]
    assert end is not None, "the call was answered"
    return end - record["t_start"]


def test_a_batched_call_waits_its_own_service_time_and_a_single_prompt_the_delay(
    fake: FakeSGLang, client: httpx.Client
) -> None:
    fake.delay, fake.batch_delay = 0.15, 0.02
    client.post("/generate", json=body(PREFIX, [1], rid="warm"))
    client.post("/generate", json=batch_body([[*PREFIX, 1], [*PREFIX, 2]], [[1], [1]], ["a", "b"]))
    warm, batch = fake.requests
    assert call_seconds(warm) >= 0.15 and 0.02 <= call_seconds(batch) < 0.15


def test_without_a_batch_delay_a_batched_call_waits_the_delay(fake: FakeSGLang, client: httpx.Client) -> None:
    fake.delay = 0.1
    client.post("/generate", json=batch_body([[*PREFIX, 1], [*PREFIX, 2]], [[1], [1]], ["a", "b"]))
    assert fake.batch_delay is None and call_seconds(fake.requests[0]) >= 0.1


async def hammer(url: str, total: int, connections: int) -> float:
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as http:
        gate = asyncio.Semaphore(connections)

        async def one(i: int) -> None:
            async with gate:
                ids = [*PREFIX, i]
                reply = await http.post("/generate", json=body(ids, [1, 2], rid=f"h{i}"))
                assert label_logprobs(reply.json()) == {1: fake_logprob(ids, 1), 2: fake_logprob(ids, 2)}

        started = time.monotonic()
        await asyncio.gather(*(one(i) for i in range(total)))
        return time.monotonic() - started


def test_serves_many_concurrent_keep_alive_requests_correctly(fake: FakeSGLang) -> None:
    elapsed = asyncio.run(hammer(fake.url, total=200, connections=32))
    assert len(fake.requests) == 200 and elapsed < 30


# ---- standalone process -------------------------------------------------------------------------


def test_module_runs_as_a_separate_server_process() -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "fake_sglang", "--port", str(port), "--delay", "0", "--batch-delay", "0.01"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip().endswith(f"127.0.0.1:{port}")
        reply = httpx.post(f"http://127.0.0.1:{port}/generate", json=body(PREFIX, [4]), timeout=10)
        assert label_logprobs(reply.json()) == {4: fake_logprob(PREFIX, 4)}
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0

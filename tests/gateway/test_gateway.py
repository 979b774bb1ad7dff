"""The API behind the real SGLang model gateway (smg) in front of two fake SGLang workers, in both
branch modes: same answers as a direct connection, cache-aware placement, failover, readiness,
cancellation that reaches the worker."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from fake_sglang import FakeSGLang
from inference.backends.sglang import SGLangBackend
from inference.runner import plan_run
from serving.supervisor import StartupTimeout, health_wait
from testbed.evaluators import url_evaluator
from testbed.qwen3 import qwen3_tokenizer
from testbed.smg import Gateway, wait_until
from tests.api.helpers import assert_answers_expected, expected_probabilities, plan_for
from tests.conftest import README_REQUEST
from tests.gateway.conftest import MODEL, gateway_evaluator
from tests.ops.helpers import Serve

pytestmark = pytest.mark.servers


def request_with_state(i: int) -> dict[str, object]:
    return {**README_REQUEST, "state": f"Ticket {i}: my order #{1000 + i} arrived broken, the box was crushed."}


def assert_unavailable(response: httpx.Response) -> None:
    """503 backend_unavailable with Retry-After: a client may come back, nothing is broken."""
    assert response.status_code == 503, response.text
    assert response.json()["detail"]["error_type"] == "backend_unavailable" and response.headers["retry-after"]


def rids_of(worker: FakeSGLang) -> list[str]:
    return [r["body"]["rid"] for r in worker.requests]


async def test_answers_through_the_gateway_equal_a_direct_connection(live_gateway, workers, branch_mode, api_on):
    via = await api_on(gateway_evaluator(live_gateway, branch_mode=branch_mode)).post(
        "/v1/systemone", json=README_REQUEST
    )
    direct = await api_on(url_evaluator(workers[0].url, branch_mode=branch_mode)).post(
        "/v1/systemone", json=README_REQUEST
    )
    assert via.status_code == direct.status_code == 200, via.text
    assert via.json() == direct.json()
    assert_answers_expected(via.json()["answers"], expected_probabilities(workers[0], README_REQUEST))


async def test_batched_mode_sends_one_flat_label_list_and_one_rid_the_gateway_accepts(live_gateway, workers, api_on):
    response = await api_on(gateway_evaluator(live_gateway)).post("/v1/systemone", json=README_REQUEST)
    assert response.status_code == 200, response.text
    (batch,) = [r["body"] for w in workers for r in w.requests if isinstance(r["body"]["input_ids"][0], list)]
    plan = plan_for(README_REQUEST)
    assert isinstance(batch["rid"], str)
    assert sorted(batch["token_ids_logprob"]) == sorted({t for b in plan.branches for t in b.label_ids})
    assert batch["model"] == "unknown"  # added by the gateway on its way, and accepted like SGLang does


async def test_distinct_states_in_flight_together_use_both_workers(live_gateway, workers, branch_mode, api_on):
    """A state no worker holds is a cache miss, which smg's cache-aware policy sends to the least-loaded
    worker (the first one on a tie): evaluations of distinct states that overlap spread over both workers.
    One after the other, each would find both workers idle and go to the first, unless smg had not yet
    counted the previous request as finished, a race this test once lost in a full run."""
    for worker in workers:
        worker.delay = 0.05  # each request stays in flight long enough for the next to see its load
    api = api_on(gateway_evaluator(live_gateway, branch_mode=branch_mode))
    responses = await asyncio.gather(*(api.post("/v1/systemone", json=request_with_state(i)) for i in range(6)))
    assert [r.status_code for r in responses] == [200] * 6
    assert all(w.generate_calls >= 2 for w in workers), [w.generate_calls for w in workers]


async def test_every_evaluation_runs_its_branches_on_its_warm_ups_worker(live_gateway, workers, branch_mode, api_on):
    """The cache-aware gateway routes a batch on its first item, which starts with the warm-up's prefix:
    every branch reads the whole prefix from the cache of the worker that prefilled it (a branch on the
    other worker, which never saw this state, would find only the chat template's first tokens)."""
    api = api_on(gateway_evaluator(live_gateway, branch_mode=branch_mode))
    for i in range(6):
        response = await api.post("/v1/systemone", json=request_with_state(i))
        assert response.status_code == 200
        prefix_tokens = int(response.headers["x-openjev-prefix-tokens"])
        cached = int(response.headers["x-openjev-cached-tokens"])
        # Parallel branches may also find an earlier sibling's first question tokens.
        assert cached == 3 * prefix_tokens if branch_mode == "batched" else cached >= 3 * prefix_tokens


async def test_a_worker_killed_mid_run_fails_over_or_fails_fast_with_503(live_gateway, workers, branch_mode, api_on):
    for worker in workers:
        worker.delay = 0.5
    api = api_on(gateway_evaluator(live_gateway, branch_mode=branch_mode))
    started = time.monotonic()
    tasks = [asyncio.create_task(api.post("/v1/systemone", json=request_with_state(i))) for i in range(6)]
    await asyncio.to_thread(wait_until, lambda: workers[0].waiting_calls > 0, what="a call on the first worker")
    workers[0].dead()
    responses = await asyncio.wait_for(asyncio.gather(*tasks), timeout=30)
    assert time.monotonic() - started < 15  # nothing hangs
    for response in responses:
        if response.status_code != 200:
            assert_unavailable(response)
    assert [r.status_code for r in responses].count(200) >= 1


async def test_all_workers_down_is_503_and_readiness_follows_them_down_and_up(live_gateway, workers, api_on):
    api = api_on(gateway_evaluator(live_gateway))
    for worker in workers:
        worker.dead()
    assert_unavailable(await api.post("/v1/systemone", json=README_REQUEST))  # 500 call_upstream_connection_failed
    await asyncio.to_thread(live_gateway.wait_for, "/readiness", 503)
    assert (await api.get("/health")).status_code == 503
    workers[1].revive()
    await asyncio.to_thread(live_gateway.wait_for, "/readiness", 200)
    assert (await api.get("/health")).status_code == 200
    assert (await api.post("/v1/systemone", json=README_REQUEST)).status_code == 200


async def test_a_gateway_without_workers_is_not_ready(empty_gateway: Gateway, api_on):
    assert httpx.get(empty_gateway.url + "/health").status_code == 200  # why /health cannot be the check
    assert httpx.get(empty_gateway.url + "/readiness").status_code == 503
    api = api_on(gateway_evaluator(empty_gateway))
    health = await api.get("/health")
    assert health.status_code == 503 and health.headers["retry-after"]
    assert_unavailable(await api.post("/v1/systemone", json=README_REQUEST))  # the gateway's 404 model_not_found


def test_waiting_for_a_gateway_waits_for_a_worker(empty_gateway: Gateway, workers):
    with pytest.raises(StartupTimeout, match="last: HTTP 503"):
        health_wait(
            url=f"{empty_gateway.url}/readiness",
            fallback_url=f"{empty_gateway.url}/health",
            process=None,
            timeout=0.5,
            interval=0.05,
        )
    bare = workers[0].url  # a bare SGLang has no /readiness: its /health is the check
    assert health_wait(url=f"{bare}/readiness", fallback_url=f"{bare}/health", process=None, timeout=5) >= 0


def test_serve_connect_to_an_empty_gateway_does_not_start(empty_gateway: Gateway, tmp_path):
    with Serve(["--connect", empty_gateway.url, "--startup-timeout", "2"], log=tmp_path / "serve.log") as serve:
        assert serve.wait_exit() == 1, serve.log
        assert "was not healthy after 2 s (last: HTTP 503)" in serve.log


def test_serve_connect_answers_through_the_gateway(live_gateway, workers, tmp_path):
    with Serve(["--connect", live_gateway.url], log=tmp_path / "serve.log") as serve:
        assert serve.wait_healthy().json()["status"] == "ok"
        response = httpx.post(serve.url + "/v1/systemone", json=README_REQUEST, timeout=30)
        assert response.status_code == 200, response.text


async def test_cancelling_an_evaluation_aborts_its_call_on_the_worker(live_gateway, workers, branch_mode):
    """Closing the connection is the whole cancellation: the gateway closes its upstream connection, and
    the worker (like SGLang) aborts the request whose client went away; no /abort_request is sent (the
    gateway would answer 404)."""
    for worker in workers:
        worker.delay = 1.0
    backend = SGLangBackend(url=live_gateway.url, model=MODEL, tokenizer=qwen3_tokenizer(), branch_mode=branch_mode)
    task = asyncio.create_task(
        plan_run(
            plan=plan_for(README_REQUEST), backend=backend, scoring=url_evaluator(live_gateway.url).scoring, timeout=60
        )
    )
    await asyncio.to_thread(wait_until, lambda: sum(w.waiting_calls for w in workers) > 0, what="the warm-up")
    for worker in workers:
        worker.delay = 30  # the warm-up keeps its 1 s; the branches then wait until they are cut
    await asyncio.to_thread(
        wait_until,
        lambda: sum(w.generate_calls for w in workers) >= 2 and sum(w.waiting_calls for w in workers) > 0,
        what="the branches",
    )
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.to_thread(lambda: [w.wait_idle(5) for w in workers])  # long before the 30 s delay
    cut = sorted(rid for w in workers for rid in w.disconnected)
    branch_rids = sorted(rid for w in workers for rid in rids_of(w))[1:]  # rids grow: the warm-up's is first
    if branch_mode == "batched":
        assert cut == [f"{branch_rids[0]}_{i}" for i in range(3)]
    else:
        assert cut == branch_rids
    assert all(w.aborted == [] for w in workers)
    await backend.close()

"""The SGLang client over real HTTP against the fake: the batched request shape, strict reading of
answers, errors classified as unavailable or failed, readiness, and no credentials in messages."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from inference.backends.base import BranchCall, Prefix
from inference.backends.sglang import SGLangBackend
from inference.backends.sglang_failures import failure_classify
from inference.backends.sglang_http import LoopHttp
from inference.backends.sglang_wire import response_json_read
from inference.errors import BackendFailed, BackendUnavailable
from inference.redaction import url_credentials_redact
from inference.tracing import trace_headers_bound
from testbed.qwen3 import qwen3_tokenizer
from tests.ops.helpers import free_port

PREFIX = Prefix(ids=tuple(range(1000, 1040)))


def backend_for(url: str, **kw: object) -> SGLangBackend:
    return SGLangBackend(url=url, model="m", tokenizer=qwen3_tokenizer(), **kw)  # type: ignore[arg-type]


def calls_of(*labels: list[int]) -> list[BranchCall]:
    return [BranchCall(rid=f"e-{i}", prefix=PREFIX, suffix=[7, i], label_ids=ids) for i, ids in enumerate(labels)]


async def test_a_batch_is_one_request_with_one_rid_and_the_union_of_its_label_ids(fake):
    calls = calls_of([10, 11], [11, 12, 13], [10])
    generations = await backend_for(fake.url).score(calls=calls)
    (request,) = fake.requests
    assert request["body"]["rid"] == "e-0" and request["body"]["token_ids_logprob"] == [10, 11, 12, 13]
    for call, generation in zip(calls, generations, strict=True):
        assert generation.label_logprobs == tuple(fake.predict_logprob(call.ids, t) for t in call.label_ids)


async def test_parallel_branches_each_ask_for_their_own_labels(fake):
    calls = calls_of([10, 11], [12])
    await backend_for(fake.url, branch_mode="parallel").score(calls=calls)
    assert sorted((r["body"]["rid"], r["body"]["token_ids_logprob"]) for r in fake.requests) == [
        ("e-0", [10, 11]),
        ("e-1", [12]),
    ]


@pytest.mark.parametrize("mode", ["duplicate_logprob", "reversed_batch"])
async def test_an_answer_that_repeats_a_label_or_reorders_the_batch_is_refused(fake, mode):
    fake.malformed = mode
    with pytest.raises(BackendFailed, match="twice" if mode == "duplicate_logprob" else "was expected"):
        await backend_for(fake.url).score(calls=calls_of([10, 11], [12]))


@pytest.mark.parametrize(
    ("status", "body", "unavailable"),
    [
        (503, "", True),
        (404, {"error": {"code": "model_not_found", "message": "No worker available for model 'unknown'"}}, True),
        (503, {"error": {"code": "no_models_available"}}, True),
        (500, {"error": {"code": "call_upstream_connection_failed", "message": "error sending request"}}, True),
        (500, {"error": {"message": "fake SGLang injected failure"}}, False),
        (422, "Failed to deserialize the JSON body into the target type", False),
        (400, {"object": "error", "message": "Token id 999999 is out of vocabulary", "code": 400}, False),
    ],
)
def test_gateway_answers_for_no_worker_mean_unavailable_anything_else_failed(status, body, unavailable):
    error = failure_classify(status=status, text=body if isinstance(body, str) else json.dumps(body))
    assert isinstance(error, BackendUnavailable if unavailable else BackendFailed)
    assert str(status) in str(error)


def test_credentials_in_urls_are_redacted_wherever_they_appear():
    text = "at http://user:p@ss@gw:30000/x and https://token@h/ (plain http://gw:30000 stays)"
    redacted = "at http://***@gw:30000/x and https://***@h/ (plain http://gw:30000 stays)"
    assert url_credentials_redact(text=text) == redacted


async def test_an_unreachable_backend_is_unavailable():
    with pytest.raises(BackendUnavailable, match="unreachable"):
        await backend_for(f"http://127.0.0.1:{free_port()}").warm(rid="w", prefix=PREFIX)


def test_a_backend_answer_naming_credentials_is_redacted():
    text = json.dumps(
        {
            "error": {
                "code": "call_upstream_connection_failed",
                "message": "error sending request for url (http://u:secret@worker:30000/generate)",
            }
        }
    )
    error = failure_classify(status=500, text=text)
    assert "secret" not in str(error) and "http://***@worker:30000/generate" in str(error)
    cut = failure_classify(status=502, text="x" * 285 + " http://user:secretsecret@worker:30000/")
    assert "sec" not in str(cut)  # redacted before the message is cut to length, not after


async def test_health_of_a_bare_sglang_follows_its_health_route(fake):
    backend = backend_for(fake.url)
    assert await backend.health()
    fake.healthy = False
    assert not await backend.health()
    assert not await backend_for(f"http://127.0.0.1:{free_port()}").health()


@pytest.mark.parametrize("key", ["sekrit", None])
async def test_health_of_a_bare_sglang_with_an_api_key_follows_its_health_route(fake, key):
    fake.api_key = "sekrit"  # SGLang lets only /health (and /metrics) through without the key
    assert await backend_for(fake.url, api_key=key).health()
    fake.healthy = False
    assert not await backend_for(fake.url, api_key=key).health()


async def test_a_generate_request_carries_the_url_under_the_base_path_json_the_key_and_the_timeouts():
    async with aiohttp.ClientSession() as session:
        http = LoopHttp.of(session=session, url="http://gw.internal:30000/sglang/", api_key="k", timeout=7.0)
        assert str(http.generate_url) == "http://gw.internal:30000/sglang/generate"
        assert http.base + "/health" == "http://gw.internal:30000/sglang/health"
        assert http.generate_headers() == {"Content-Type": "application/json", "Authorization": "Bearer k"}
        assert http.headers == {"Authorization": "Bearer k"}
        assert http.timeout == aiohttp.ClientTimeout(total=None, connect=7.0, sock_connect=5.0, sock_read=7.0)
        with trace_headers_bound(headers={"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}):
            assert http.generate_headers()["traceparent"].startswith("00-111")
        assert "traceparent" not in http.generate_headers()


async def test_credentials_in_the_url_become_basic_auth_and_win_over_the_key():
    async with aiohttp.ClientSession() as session:
        http = LoopHttp.of(session=session, url="http://us%40er:p%3Ass@gw:30000", api_key="k", timeout=7.0)
    assert str(http.generate_url) == "http://gw:30000/generate"
    assert http.generate_headers()["Authorization"] == "Basic " + base64.b64encode(b"us@er:p:ss").decode()


async def test_a_cookie_the_backend_sets_goes_with_the_next_calls(fake):
    """A gateway's sticky-routing cookie is kept, from an IP host too, as the client always did."""
    seen: list[str | None] = []

    async def generate(request: web.Request) -> web.StreamResponse:
        seen.append(request.headers.get("Cookie"))
        body = await request.read()
        async with aiohttp.ClientSession() as upstream, upstream.post(fake.url + "/generate", data=body) as answer:
            response = web.Response(body=await answer.read(), content_type="application/json")  # the fake's answer
        response.set_cookie("route", "w1")
        return response

    app = web.Application()
    app.router.add_post("/generate", generate)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        backend = backend_for(f"http://127.0.0.1:{port}")
        await backend.warm(rid="w", prefix=PREFIX)
        await backend.warm(rid="w2", prefix=PREFIX)
        await backend.close()
    finally:
        await runner.cleanup()
    assert seen == [None, "route=w1"]


@pytest.mark.parametrize("key, answered", [("sekrit", True), ("wrong", False)])
async def test_generate_requests_carry_the_api_key(fake, key, answered):
    fake.api_key = "sekrit"
    backend = backend_for(fake.url, api_key=key)
    if answered:
        assert len(await backend.score(calls=calls_of([15, 16], [15, 16]))) == 2
    else:
        with pytest.raises(BackendFailed):
            await backend.score(calls=calls_of([15, 16], [15, 16]))


async def test_a_backend_slower_than_the_client_timeout_fails_as_timed_out(fake):
    fake.delay = 2.0
    with pytest.raises(BackendFailed, match="did not answer in time"):
        await backend_for(fake.url, timeout=0.3).score(calls=calls_of([15, 16], [15, 16]))


async def test_abort_sends_nothing_closing_the_connection_is_the_abort(fake):
    await backend_for(fake.url).abort(rids=["a", "b"])
    assert fake.aborted == [] and fake.requests == []


def test_a_backend_body_with_python_json_constants_still_reads_as_before():
    body = b'[{"meta_info": {"output_token_ids_logprobs": [[[-Infinity, 10, null], [-0.5, 11, null]]]}}]'
    entries = response_json_read(body)[0]["meta_info"]["output_token_ids_logprobs"][0]
    assert entries[0][0] == float("-inf") and entries[1] == [-0.5, 11, None]
    assert response_json_read(b'{"a": [1, 2.5, "\\u00e9"]}') == {"a": [1, 2.5, "\u00e9"]}


EXIT_SCRIPT = """
import asyncio, gc, sys
from inference.backends.base import Prefix
from inference.backends.sglang import SGLangBackend
from testbed.qwen3 import qwen3_tokenizer
kept = SGLangBackend(url=sys.argv[1], model="m", tokenizer=qwen3_tokenizer())
dropped = SGLangBackend(url=sys.argv[1], model="m", tokenizer=qwen3_tokenizer())
for backend in (kept, dropped, kept):  # a loop per run, as tests and management commands have
    asyncio.run(backend.warm(rid="w", prefix=Prefix(ids=tuple(range(1000, 1040)))))
del dropped
gc.collect()
print("ok")
"""


def test_a_process_that_used_the_backend_exits_without_reporting_leaked_connections(fake):
    """The pooled connections are closed when the backend goes or the process ends, so operators never
    read an 'Unclosed client session' error at shutdown."""
    done = subprocess.run(
        [sys.executable, "-c", EXIT_SCRIPT, fake.url],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
    assert "Unclosed" not in done.stderr and "never awaited" not in done.stderr, done.stderr
    assert len(fake.requests) == 3

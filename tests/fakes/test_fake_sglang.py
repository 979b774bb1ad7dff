"""The fake SGLang must be faithful where our client depends on SGLang's behaviour, and controllable elsewhere.

These tests talk to the fake over real loopback HTTP, the way the backend client will.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.sglang import (
    CLAMPED_LOGPROB,
    LOGPROB_MAX,
    LOGPROB_MIN,
    FakeSGLang,
    PrefixCache,
    fake_logprob,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
SAMPLING = {"max_new_tokens": 1, "temperature": 0.0}
PREFIX = list(range(1000, 1050))


@pytest.fixture(scope="module")
def shared() -> Iterator[FakeSGLang]:
    with FakeSGLang() as server:
        yield server


@pytest.fixture
def fake(shared: FakeSGLang) -> FakeSGLang:
    """The module's server with fresh records, controls and cache for every test."""
    shared.reset()
    return shared


@pytest.fixture
def client(fake: FakeSGLang) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=fake.url, timeout=10) as http:
        yield http


def body(ids: list[Any], labels: list[Any], rid: Any = "r1", **extra: Any) -> dict[str, Any]:
    """The request our SGLang client sends for one branch (loosely typed: tests also send broken ones)."""
    return {"input_ids": ids, "sampling_params": SAMPLING, "return_logprob": True, "token_ids_logprob": labels,
            "logprob_start_len": -1, "rid": rid, **extra}


def batch_body(prompts: list[list[int]], labels: list[list[int]], rids: list[str]) -> dict[str, Any]:
    return {"input_ids": prompts, "sampling_params": SAMPLING, "return_logprob": True, "token_ids_logprob": labels,
            "logprob_start_len": -1, "rid": rids}


def label_logprobs(result: dict[str, Any]) -> dict[int, float]:
    return {entry[1]: entry[0] for entry in result["meta_info"]["output_token_ids_logprobs"][0]}


def error_message(response: httpx.Response) -> str:
    """Both SGLang error bodies: its ValueError one and its rewritten validation-error one."""
    payload = response.json()
    return str(payload["error"]["message"] if "error" in payload else payload["message"])


# ---- answers ------------------------------------------------------------------------------------


def test_single_request_answers_sglang_shape_with_predictable_logprobs(client: httpx.Client) -> None:
    ids, labels = [*PREFIX, 7, 8], [11, 12, 13]
    response = client.post("/generate", json=body(ids, labels, rid="one"))
    assert response.status_code == 200
    result = response.json()
    meta = result["meta_info"]
    expected = {t: fake_logprob(ids, t) for t in labels}
    best = max(labels, key=expected.__getitem__)
    assert result["output_ids"] == [best] and isinstance(result["text"], str)
    assert meta["id"] == "one"
    assert meta["finish_reason"] == {"type": "length", "length": 1}
    assert meta["prompt_tokens"] == len(ids) and meta["completion_tokens"] == 1 and meta["cached_tokens"] == 0
    assert isinstance(meta["e2e_latency"], float)
    assert meta["output_token_logprobs"] == [[expected[best], best, None]]
    assert label_logprobs(result) == expected
    assert all(entry[2] is None for entry in meta["output_token_ids_logprobs"][0])
    for key in ("input_token_logprobs", "input_top_logprobs", "input_token_ids_logprobs"):
        assert meta[key] == []


def test_label_entries_are_complete_and_shuffled_but_repeatable(client: httpx.Client) -> None:
    labels = list(range(100, 120))
    first = client.post("/generate", json=body(PREFIX, labels)).json()
    again = client.post("/generate", json=body(PREFIX, labels)).json()
    order = [entry[1] for entry in first["meta_info"]["output_token_ids_logprobs"][0]]
    assert sorted(order) == labels and len(order) == len(labels)
    assert order != labels
    assert order == [entry[1] for entry in again["meta_info"]["output_token_ids_logprobs"][0]]


def test_two_labels_never_come_back_in_the_requested_order(client: httpx.Client) -> None:
    for last in range(20):
        result = client.post("/generate", json=body([*PREFIX, last], [5, 6])).json()
        assert [entry[1] for entry in result["meta_info"]["output_token_ids_logprobs"][0]] == [6, 5]


def test_missing_token_ids_logprob_gives_a_null_position(client: httpx.Client) -> None:
    payload = body(PREFIX, [])
    del payload["token_ids_logprob"]
    meta = client.post("/generate", json=payload).json()["meta_info"]
    assert meta["output_token_ids_logprobs"] == [None]


def test_no_logprob_keys_without_return_logprob(client: httpx.Client) -> None:
    meta = client.post("/generate", json=body(PREFIX, [1], return_logprob=False)).json()["meta_info"]
    assert "output_token_ids_logprobs" not in meta and "output_token_logprobs" not in meta


def test_input_logprobs_follow_logprob_start_len(client: httpx.Client) -> None:
    ids = [3, 4, 5, 6]
    meta = client.post("/generate", json=body(ids, [1], logprob_start_len=0)).json()["meta_info"]
    assert meta["input_token_logprobs"] == [[None, 3, None]] + [[fake_logprob(ids[:i], ids[i]), ids[i], None]
                                                               for i in range(1, 4)]


def test_text_in_logprobs_fills_the_third_field(client: httpx.Client) -> None:
    meta = client.post("/generate", json=body(PREFIX, [1, 2], return_text_in_logprobs=True)).json()["meta_info"]
    assert all(isinstance(entry[2], str) for entry in meta["output_token_ids_logprobs"][0])


def test_top_logprobs_start_with_the_greedy_token(client: httpx.Client) -> None:
    meta = client.post("/generate", json=body(PREFIX, [1, 2, 3], top_logprobs_num=3)).json()["meta_info"]
    top = meta["output_top_logprobs"][0]
    assert len(top) == 3 and top[0][:2] == meta["output_token_logprobs"][0][:2]
    assert [entry[0] for entry in top] == sorted((entry[0] for entry in top), reverse=True)


def test_zero_new_tokens_computes_the_prompt_only(client: httpx.Client) -> None:
    result = client.post("/generate", json=body(PREFIX, [1], sampling_params={"max_new_tokens": 0})).json()
    assert result["output_ids"] == [] and result["meta_info"]["completion_tokens"] == 0
    assert result["meta_info"]["output_token_ids_logprobs"] == []


# ---- fake_logprob -------------------------------------------------------------------------------


def test_fake_logprob_is_deterministic_within_range_and_sensitive_to_inputs() -> None:
    values = {fake_logprob([1, 2, 3], t) for t in range(200)}
    assert all(LOGPROB_MIN <= v <= LOGPROB_MAX for v in values)
    assert len(values) == 200
    assert fake_logprob([1, 2, 3], 9) == fake_logprob((1, 2, 3), 9)
    assert fake_logprob([1, 2, 3], 9) != fake_logprob([1, 2, 4], 9)
    assert fake_logprob([1, 2, 3], 9) != fake_logprob([1, 2], 9)


def test_fake_logprob_is_identical_in_another_process() -> None:
    code = "from tests.fakes.sglang import fake_logprob; print(repr(fake_logprob([5, 151935, 0], 42)))"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                         check=True, timeout=60)
    assert float(out.stdout) == fake_logprob([5, 151935, 0], 42)


def test_overrides_clamp_tokens_and_replace_the_logprob_function(fake: FakeSGLang, client: httpx.Client) -> None:
    fake.clamp_token_ids = {12}
    got = label_logprobs(client.post("/generate", json=body(PREFIX, [11, 12])).json())
    assert got == {11: fake_logprob(PREFIX, 11), 12: CLAMPED_LOGPROB}
    fake.logprob_fn = lambda ids, token: -float(token)
    got = label_logprobs(client.post("/generate", json=body(PREFIX, [11, 13])).json())
    assert got == {11: -11.0, 13: -13.0} == {t: fake.predict_logprob(PREFIX, t) for t in (11, 13)}


# ---- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["logprobs", "max_tokens", "seed", "best_of", "guided_choice"])
def test_unknown_sampling_key_is_rejected_with_400(client: httpx.Client, key: str) -> None:
    response = client.post("/generate", json=body(PREFIX, [1], sampling_params={**SAMPLING, key: 1}))
    assert response.status_code == 400
    assert key in error_message(response)


def test_every_sglang_sampling_key_is_accepted(client: httpx.Client) -> None:
    params = {"max_new_tokens": 1, "stop": ["\n"], "stop_token_ids": [2], "temperature": 0.0, "top_p": 1.0,
              "top_k": -1, "min_p": 0.0, "frequency_penalty": 0.0, "presence_penalty": 0.0,
              "repetition_penalty": 1.0, "min_new_tokens": 0, "n": 1, "json_schema": None, "regex": None,
              "ebnf": None, "structural_tag": None, "ignore_eos": False, "skip_special_tokens": True,
              "spaces_between_special_tokens": True, "no_stop_trim": False, "custom_params": None,
              "stream_interval": None, "logit_bias": None, "sampling_seed": 7}
    assert client.post("/generate", json=body(PREFIX, [1], sampling_params=params)).status_code == 200


@pytest.mark.parametrize("params", [{"temperature": -1}, {"top_p": 0}, {"top_k": 0}, {"min_p": 2},
                                    {"repetition_penalty": 0}, {"max_new_tokens": -1}, {"n": 2},
                                    {"min_new_tokens": 3, "max_new_tokens": 1}, {"regex": "a", "ebnf": "b"}])
def test_out_of_range_sampling_values_are_rejected_with_400(client: httpx.Client, params: dict[str, Any]) -> None:
    assert client.post("/generate", json=body(PREFIX, [1], sampling_params=params)).status_code == 400


@pytest.mark.parametrize("payload", [
    [1, 2, 3],
    {"sampling_params": SAMPLING},
    body([], [1]),
    body([1, "2"], [1]),
    body([1, 2.0], [1]),
    body([1, True], [1]),
    body([1, 151936], [1]),
    body([-1, 2], [1]),
    body(PREFIX, [151936]),
    body(PREFIX, [1], text="hello"),
    {"text": "hello", "sampling_params": SAMPLING},
    body(PREFIX, [1], stream=True),
    body(PREFIX, [1], temperature=0),
    body(PREFIX, [1], input_embeds=[[0.1]]),
    body(PREFIX, [1], rid=["a"]),
    body(PREFIX, [1], logprob_start_len=len(PREFIX)),
    body(PREFIX, [1], return_logprob="yes"),
    body(PREFIX, [1], sampling_params=[SAMPLING]),
], ids=["list", "no-ids", "empty", "str-id", "float-id", "bool-id", "id-past-vocab", "negative-id",
        "label-past-vocab", "text-and-ids", "text-only", "stream", "unknown-top-level", "input-embeds",
        "list-rid-single", "start-past-end", "non-bool-flag", "sampling-list-single"])
def test_malformed_bodies_are_rejected_with_400(client: httpx.Client, payload: Any) -> None:
    response = client.post("/generate", json=payload)
    assert response.status_code == 400
    assert error_message(response)


def test_non_json_body_is_rejected_with_400(client: httpx.Client) -> None:
    response = client.post("/generate", content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 400 and response.json()["code"] == 400


def test_context_length_is_enforced(client: httpx.Client) -> None:
    with FakeSGLang(context_length=64) as small, httpx.Client(base_url=small.url) as http:
        assert http.post("/generate", json=body(list(range(63)), [1])).status_code == 400
        assert http.post("/generate", json=body(list(range(62)), [1])).status_code == 200


def test_vocab_size_is_configurable() -> None:
    with FakeSGLang(vocab_size=100) as small, httpx.Client(base_url=small.url) as http:
        assert http.post("/generate", json=body([99], [1])).status_code == 200
        assert http.post("/generate", json=body([100], [1])).status_code == 400


# ---- batches ------------------------------------------------------------------------------------


def test_batched_request_answers_a_list_in_order_with_per_item_labels(client: httpx.Client) -> None:
    prompts = [[*PREFIX, 1], [*PREFIX, 2, 3], [9]]
    labels = [[10, 11], [12], [13, 14, 15]]
    response = client.post("/generate", json=batch_body(prompts, labels, ["a", "b", "c"]))
    assert response.status_code == 200
    results = response.json()
    assert isinstance(results, list) and [r["meta_info"]["id"] for r in results] == ["a", "b", "c"]
    for result, ids, wanted in zip(results, prompts, labels, strict=True):
        assert result["meta_info"]["prompt_tokens"] == len(ids)
        assert label_logprobs(result) == {t: fake_logprob(ids, t) for t in wanted}


def test_batch_of_one_still_answers_a_list(client: httpx.Client) -> None:
    results = client.post("/generate", json=batch_body([PREFIX], [[1]], ["only"])).json()
    assert isinstance(results, list) and len(results) == 1


def test_batch_broadcasts_flat_labels_and_one_sampling_dict(client: httpx.Client) -> None:
    payload = {**batch_body([[1, 2], [3, 4]], [], ["a", "b"]), "token_ids_logprob": [7, 8]}
    results = client.post("/generate", json=payload).json()
    assert [set(label_logprobs(r)) for r in results] == [{7, 8}, {7, 8}]


def test_batch_expands_one_string_rid_to_one_rid_per_item(client: httpx.Client) -> None:
    payload = {**batch_body([[1, 2], [3, 4], [5]], [], ["unused"]), "token_ids_logprob": [7], "rid": "base"}
    results = client.post("/generate", json=payload).json()
    assert [r["meta_info"]["id"] for r in results] == ["base_0", "base_1", "base_2"]


@pytest.mark.parametrize("rid", [["a", "a"], [1, 2], 7])
def test_batch_rids_must_be_distinct_strings(client: httpx.Client, rid: Any) -> None:
    payload = {**batch_body([[1, 2], [3, 4]], [[1], [2]], []), "rid": rid}
    assert client.post("/generate", json=payload).status_code == 400


def test_keys_the_gateway_adds_are_accepted(client: httpx.Client) -> None:
    forwarded = {"model": "unknown", "return_text_in_logprobs": False, "stream": False, "log_metrics": True,
                 "background": False, "no_logs": False, "return_bytes": False, "return_entropy": False}
    assert client.post("/generate", json=body(PREFIX, [1], **forwarded)).status_code == 200


@pytest.mark.parametrize("override", [{"rid": ["a"]}, {"token_ids_logprob": [[1]]},
                                      {"sampling_params": [SAMPLING]}, {"return_logprob": [True]},
                                      {"logprob_start_len": [-1, -1, -1]}])
def test_batch_whose_list_lengths_disagree_is_rejected(client: httpx.Client, override: dict[str, Any]) -> None:
    payload = {**batch_body([[1, 2], [3, 4]], [[1], [2]], ["a", "b"]), **override}
    assert client.post("/generate", json=payload).status_code == 400


def test_long_prompts_and_large_batches_are_accepted(client: httpx.Client) -> None:
    ids = [i % 150000 for i in range(30000)]
    reply = client.post("/generate", json=body(ids, list(range(64))))
    assert reply.status_code == 200 and len(label_logprobs(reply.json())) == 64
    results = client.post("/generate", json=batch_body([[*PREFIX, i] for i in range(64)], [[1]] * 64,
                                                        [f"r{i}" for i in range(64)])).json()
    assert len(results) == 64


def test_batch_with_an_empty_prompt_is_rejected(client: httpx.Client) -> None:
    assert client.post("/generate", json=batch_body([[1], []], [[1], [1]], ["a", "b"])).status_code == 400


# ---- prefix cache -------------------------------------------------------------------------------


def cached(client: httpx.Client, ids: list[int]) -> int:
    return int(client.post("/generate", json=body(ids, [1])).json()["meta_info"]["cached_tokens"])


def test_cached_tokens_grows_with_shared_prefixes(client: httpx.Client) -> None:
    assert cached(client, PREFIX) == 0
    assert cached(client, [*PREFIX, 1, 2]) == len(PREFIX)
    assert cached(client, [*PREFIX, 1, 2, 3]) == len(PREFIX) + 2
    assert cached(client, [*PREFIX[:30], 5]) == 30
    assert cached(client, [999, *PREFIX]) == 0


def test_repeating_a_prompt_still_computes_its_last_token(client: httpx.Client) -> None:
    cached(client, PREFIX)
    assert cached(client, PREFIX) == len(PREFIX) - 1
    assert cached(client, PREFIX[:10]) == 9


def test_batch_items_reuse_earlier_prompts_but_not_each_other(client: httpx.Client) -> None:
    cached(client, PREFIX)
    prompts = [[*PREFIX, 1, 2, 3], [*PREFIX, 1, 2, 3, 4]]
    results = client.post("/generate", json=batch_body(prompts, [[1], [1]], ["a", "b"])).json()
    assert [r["meta_info"]["cached_tokens"] for r in results] == [len(PREFIX), len(PREFIX)]
    assert cached(client, [*PREFIX, 1, 2, 3, 4, 5]) == len(PREFIX) + 4


def test_cached_tokens_can_be_omitted(fake: FakeSGLang, client: httpx.Client) -> None:
    fake.report_cached_tokens = False
    meta = client.post("/generate", json=body(PREFIX, [1])).json()["meta_info"]
    assert "cached_tokens" not in meta


def test_reset_forgets_the_cache(fake: FakeSGLang, client: httpx.Client) -> None:
    cached(client, PREFIX)
    fake.reset()
    assert cached(client, PREFIX) == 0


def test_prefix_cache_splits_edges_and_stays_bounded() -> None:
    cache = PrefixCache(capacity_tokens=20)
    cache.insert([1, 2, 3, 4, 5])
    cache.insert([1, 2, 9])
    cache.insert([1, 2])
    assert (cache.match([1, 2, 3, 4, 5, 6]), cache.match([1, 2, 9, 9]), cache.match([1, 7])) == (5, 3, 1)
    assert cache.size == 6
    cache.insert(list(range(100, 120)))
    assert cache.match([1, 2]) == 0 and cache.match(list(range(100, 120))) == 20


# ---- aborts -------------------------------------------------------------------------------------


def post_in_thread(url: str, payload: dict[str, Any]) -> tuple[threading.Thread, list[httpx.Response]]:
    responses: list[httpx.Response] = []

    def run() -> None:
        responses.append(httpx.post(f"{url}/generate", json=payload, timeout=30))

    thread = threading.Thread(target=run)
    thread.start()
    return thread, responses


def test_abort_finishes_a_slow_request_early(fake: FakeSGLang, client: httpx.Client) -> None:
    fake.delay = 20
    started = time.monotonic()
    thread, responses = post_in_thread(fake.url, body(PREFIX, [1, 2], rid="slow"))
    fake.wait_in_flight(1)
    assert client.post("/abort_request", json={"rid": "slow"}).status_code == 200
    thread.join(timeout=10)
    assert time.monotonic() - started < 5
    assert responses[0].status_code == 200
    meta = responses[0].json()["meta_info"]
    assert meta["finish_reason"] == {"type": "abort", "message": "Abort before prefill"}
    assert meta["id"] == "slow" and meta["output_token_ids_logprobs"] == []
    assert fake.aborted == ["slow"]
    fake.delay = 0
    assert cached(client, PREFIX) == 0  # an aborted prompt was never computed


def test_abort_of_an_unknown_rid_is_recorded_and_harmless(fake: FakeSGLang, client: httpx.Client) -> None:
    assert client.post("/abort_request", json={"rid": "nobody"}).status_code == 200
    assert fake.aborted == ["nobody"]
    assert client.post("/generate", json=body(PREFIX, [1], rid="nobody")).json()["meta_info"]["finish_reason"][
        "type"] == "length"


def test_abort_all_ends_every_in_flight_call(fake: FakeSGLang, client: httpx.Client) -> None:
    fake.delay = 20
    calls = [post_in_thread(fake.url, body([*PREFIX, i], [1], rid=f"r{i}")) for i in range(3)]
    fake.wait_in_flight(3)
    client.post("/abort_request", json={"abort_all": True})
    for thread, responses in calls:
        thread.join(timeout=10)
        assert responses[0].json()["meta_info"]["finish_reason"]["type"] == "abort"
    assert sorted(fake.aborted) == ["r0", "r1", "r2"]


def test_aborting_one_batch_item_leaves_the_others(fake: FakeSGLang, client: httpx.Client) -> None:
    fake.delay = 0.5
    thread, responses = post_in_thread(fake.url, batch_body([[1, 2], [3, 4]], [[1], [2]], ["keep", "drop"]))
    fake.wait_in_flight(1)
    client.post("/abort_request", json={"rid": "drop"})
    thread.join(timeout=10)
    kinds = [r["meta_info"]["finish_reason"]["type"] for r in responses[0].json()]
    assert kinds == ["length", "abort"]


@pytest.mark.parametrize("payload", [{"rid": ["a", "b"]}, {"rid": 7}, {"abort_all": "yes"}, []])
def test_abort_takes_one_string_rid_or_abort_all(fake: FakeSGLang, client: httpx.Client, payload: Any) -> None:
    assert client.post("/abort_request", json=payload).status_code == 400
    assert fake.aborted == []


def test_aborting_a_batchs_base_rid_leaves_its_items_running(fake: FakeSGLang, client: httpx.Client) -> None:
    fake.delay = 0.5
    payload = {**batch_body([[1, 2], [3, 4]], [], []), "token_ids_logprob": [1], "rid": "base"}
    thread, responses = post_in_thread(fake.url, payload)
    fake.wait_in_flight(1)
    client.post("/abort_request", json={"rid": "base"})
    thread.join(timeout=10)
    assert [r["meta_info"]["finish_reason"]["type"] for r in responses[0].json()] == ["length", "length"]


def test_client_disconnect_aborts_every_item_of_a_batch(fake: FakeSGLang) -> None:
    fake.delay = 20
    payload = {**batch_body([[1, 2], [3, 4]], [], []), "token_ids_logprob": [1], "rid": "gone"}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{fake.url}/generate", json=payload, timeout=0.3)
    deadline = time.monotonic() + 5
    while fake.in_flight and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fake.disconnected == ["gone_0", "gone_1"] and fake.in_flight == 0


def test_client_disconnect_aborts_a_slow_request(fake: FakeSGLang) -> None:
    fake.delay = 20
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{fake.url}/generate", json=body(PREFIX, [1], rid="gone"), timeout=0.3)
    deadline = time.monotonic() + 5
    while fake.in_flight and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fake.disconnected == ["gone"] and fake.in_flight == 0


# ---- auth, health, model info -------------------------------------------------------------------


def test_bearer_key_is_required_except_for_health(fake: FakeSGLang, client: httpx.Client) -> None:
    fake.api_key = "sekrit"
    assert client.post("/generate", json=body(PREFIX, [1])).status_code == 401
    wrong = client.post("/generate", json=body(PREFIX, [1]), headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.json() == {"error": "Unauthorized"}
    assert client.get("/v1/models").status_code == 401
    assert client.post("/abort_request", json={"rid": "x"}).status_code == 401
    assert client.get("/health").status_code == 200
    right = client.post("/generate", json=body(PREFIX, [1]), headers={"Authorization": "Bearer sekrit"})
    assert right.status_code == 200


def test_health_follows_the_healthy_flag(fake: FakeSGLang, client: httpx.Client) -> None:
    response = client.get("/health")
    assert response.status_code == 200 and response.content == b""
    assert client.get("/health_generate").status_code == 200
    fake.healthy = False
    assert client.get("/health").status_code == 503
    assert client.get("/health_generate").status_code == 503


def test_model_info_and_openai_model_list(fake: FakeSGLang, client: httpx.Client) -> None:
    for path in ("/model_info", "/get_model_info"):
        info = client.get(path).json()
        assert info["model_path"] == fake.model_path and info["is_generation"] is True and "tokenizer_path" in info
    models = client.get("/v1/models").json()
    assert models["object"] == "list" and models["data"][0]["id"] == fake.served_model_name
    assert models["data"][0]["owned_by"] == "sglang"  # how the gateway recognises an SGLang worker


def test_server_info_names_the_model_like_sglang(fake: FakeSGLang, client: httpx.Client) -> None:
    for path in ("/server_info", "/get_server_info"):
        info = client.get(path).json()
        assert info["model_path"] == fake.model_path and info["served_model_name"] == fake.served_model_name
        assert info["context_length"] == fake.context_length and "version" in info and "internal_states" in info


def test_unknown_paths_and_methods_are_404_and_405(client: httpx.Client) -> None:
    assert client.get("/nope").status_code == 404
    assert client.get("/generate").status_code == 405


# ---- failure injection --------------------------------------------------------------------------


def test_fail_status_answers_every_generate_with_that_status(fake: FakeSGLang, client: httpx.Client) -> None:
    fake.fail_status = 503
    response = client.post("/generate", json=body(PREFIX, [1]))
    assert response.status_code == 503 and error_message(response)


def test_fail_after_answers_the_first_calls_then_fails(fake: FakeSGLang, client: httpx.Client) -> None:
    fake.fail_after = 2
    statuses = [client.post("/generate", json=body(PREFIX, [1])).status_code for _ in range(4)]
    assert statuses == [200, 200, 500, 500]
    assert [r["status"] for r in fake.requests] == statuses


@pytest.mark.parametrize("mode", ["missing_logprobs", "missing_meta", "not_json"])
def test_malformed_mode_damages_successful_answers(fake: FakeSGLang, client: httpx.Client, mode: Any) -> None:
    fake.malformed = mode
    response = client.post("/generate", json=body(PREFIX, [1]))
    assert response.status_code == 200
    if mode == "not_json":
        with pytest.raises(ValueError):
            response.json()
    elif mode == "missing_meta":
        assert "meta_info" not in response.json()
    else:
        assert "output_token_ids_logprobs" not in response.json()["meta_info"]


def test_duplicate_logprob_mode_repeats_a_label_entry(fake: FakeSGLang, client: httpx.Client) -> None:
    fake.malformed = "duplicate_logprob"
    entries = client.post("/generate", json=body(PREFIX, [1, 2])).json()["meta_info"]["output_token_ids_logprobs"][0]
    assert len(entries) == 3 and entries[2] == entries[0]


def test_reversed_batch_mode_answers_the_items_out_of_order(fake: FakeSGLang, client: httpx.Client) -> None:
    fake.malformed = "reversed_batch"
    results = client.post("/generate", json=batch_body([[1, 2], [3, 4]], [[1], [2]], ["a", "b"])).json()
    assert [r["meta_info"]["id"] for r in results] == ["b", "a"]


def test_dead_server_refuses_connections_until_revived() -> None:
    with FakeSGLang() as server, httpx.Client(base_url=server.url, timeout=5) as http:
        assert http.post("/generate", json=body(PREFIX, [1])).status_code == 200  # keep-alive connection open
        server.dead()
        with pytest.raises(httpx.TransportError):
            http.post("/generate", json=body(PREFIX, [1]))
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{server.url}/health", timeout=5)
        server.revive()
        assert httpx.get(f"{server.url}/health", timeout=5).status_code == 200
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.url}/health", timeout=5)


# ---- records and concurrency --------------------------------------------------------------------


async def warm_then_branches(url: str, branches: int) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        assert (await http.post("/generate", json=body(PREFIX, [1], rid="warm"))).status_code == 200
        replies = await asyncio.gather(*(http.post("/generate", json=body([*PREFIX, i], [1], rid=f"b{i}"))
                                         for i in range(branches)))
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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_module_runs_as_a_separate_server_process() -> None:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "tests.fakes.sglang", "--port", str(port), "--delay", "0"],
                               cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip().endswith(f"127.0.0.1:{port}")
        reply = httpx.post(f"http://127.0.0.1:{port}/generate", json=body(PREFIX, [4]), timeout=10)
        assert label_logprobs(reply.json()) == {4: fake_logprob(PREFIX, 4)}
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0

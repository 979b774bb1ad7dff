"""Batched calls and the prefix cache behind `cached_tokens`."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from fake_sglang import FakeSGLang, PrefixCache, fake_logprob
from tests.fake_sglang.helpers import PREFIX, SAMPLING, batch_body, body, cached, label_logprobs

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
    forwarded = {
        "model": "unknown",
        "return_text_in_logprobs": False,
        "stream": False,
        "log_metrics": True,
        "background": False,
        "no_logs": False,
        "return_bytes": False,
        "return_entropy": False,
    }
    assert client.post("/generate", json=body(PREFIX, [1], **forwarded)).status_code == 200


@pytest.mark.parametrize(
    "override",
    [
        {"rid": ["a"]},
        {"token_ids_logprob": [[1]]},
        {"sampling_params": [SAMPLING]},
        {"return_logprob": [True]},
        {"logprob_start_len": [-1, -1, -1]},
    ],
)
def test_batch_whose_list_lengths_disagree_is_rejected(client: httpx.Client, override: dict[str, Any]) -> None:
    payload = {**batch_body([[1, 2], [3, 4]], [[1], [2]], ["a", "b"]), **override}
    assert client.post("/generate", json=payload).status_code == 400


def test_long_prompts_and_large_batches_are_accepted(client: httpx.Client) -> None:
    ids = [i % 150000 for i in range(30000)]
    reply = client.post("/generate", json=body(ids, list(range(64))))
    assert reply.status_code == 200 and len(label_logprobs(reply.json())) == 64
    results = client.post(
        "/generate", json=batch_body([[*PREFIX, i] for i in range(64)], [[1]] * 64, [f"r{i}" for i in range(64)])
    ).json()
    assert len(results) == 64


def test_batch_with_an_empty_prompt_is_rejected(client: httpx.Client) -> None:
    assert client.post("/generate", json=batch_body([[1], []], [[1], [1]], ["a", "b"])).status_code == 400


# ---- prefix cache -------------------------------------------------------------------------------


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

"""The fake answers in SGLang's shape, with log-probs tests can predict, and validates like SGLang."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from fake_sglang import CLAMPED_LOGPROB, LOGPROB_MAX, LOGPROB_MIN, FakeSGLang, fake_logprob
from tests.fake_sglang.helpers import PREFIX, SAMPLING, body, error_message, label_logprobs

REPO_ROOT = Path(__file__).resolve().parents[2]


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
    assert meta["input_token_logprobs"] == [[None, 3, None]] + [
        [fake_logprob(ids[:i], ids[i]), ids[i], None] for i in range(1, 4)
    ]


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
    code = "from fake_sglang import fake_logprob; print(repr(fake_logprob([5, 151935, 0], 42)))"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True, timeout=60
    )
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
    params = {
        "max_new_tokens": 1,
        "stop": ["\n"],
        "stop_token_ids": [2],
        "temperature": 0.0,
        "top_p": 1.0,
        "top_k": -1,
        "min_p": 0.0,
        "frequency_penalty": 0.0,
        "presence_penalty": 0.0,
        "repetition_penalty": 1.0,
        "min_new_tokens": 0,
        "n": 1,
        "json_schema": None,
        "regex": None,
        "ebnf": None,
        "structural_tag": None,
        "ignore_eos": False,
        "skip_special_tokens": True,
        "spaces_between_special_tokens": True,
        "no_stop_trim": False,
        "custom_params": None,
        "stream_interval": None,
        "logit_bias": None,
        "sampling_seed": 7,
    }
    assert client.post("/generate", json=body(PREFIX, [1], sampling_params=params)).status_code == 200


@pytest.mark.parametrize(
    "params",
    [
        {"temperature": -1},
        {"top_p": 0},
        {"top_k": 0},
        {"min_p": 2},
        {"repetition_penalty": 0},
        {"max_new_tokens": -1},
        {"n": 2},
        {"min_new_tokens": 3, "max_new_tokens": 1},
        {"regex": "a", "ebnf": "b"},
    ],
)
def test_out_of_range_sampling_values_are_rejected_with_400(client: httpx.Client, params: dict[str, Any]) -> None:
    assert client.post("/generate", json=body(PREFIX, [1], sampling_params=params)).status_code == 400


@pytest.mark.parametrize(
    "payload",
    [
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
    ],
    ids=[
        "list",
        "no-ids",
        "empty",
        "str-id",
        "float-id",
        "bool-id",
        "id-past-vocab",
        "negative-id",
        "label-past-vocab",
        "text-and-ids",
        "text-only",
        "stream",
        "unknown-top-level",
        "input-embeds",
        "list-rid-single",
        "start-past-end",
        "non-bool-flag",
        "sampling-list-single",
    ],
)
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

"""Requests as our SGLang client sends them, and how to read the fake's answers."""

from __future__ import annotations

from typing import Any

import httpx

SAMPLING = {"max_new_tokens": 1, "temperature": 0.0}
PREFIX = list(range(1000, 1050))


def body(ids: list[Any], labels: list[Any], rid: Any = "r1", **extra: Any) -> dict[str, Any]:
    """The request our SGLang client sends for one branch (loosely typed: tests also send broken ones)."""
    return {
        "input_ids": ids,
        "sampling_params": SAMPLING,
        "return_logprob": True,
        "token_ids_logprob": labels,
        "logprob_start_len": -1,
        "rid": rid,
        **extra,
    }


def batch_body(prompts: list[list[int]], labels: list[list[int]], rids: list[str]) -> dict[str, Any]:
    return {
        "input_ids": prompts,
        "sampling_params": SAMPLING,
        "return_logprob": True,
        "token_ids_logprob": labels,
        "logprob_start_len": -1,
        "rid": rids,
    }


def label_logprobs(result: dict[str, Any]) -> dict[int, float]:
    return {entry[1]: entry[0] for entry in result["meta_info"]["output_token_ids_logprobs"][0]}


def error_message(response: httpx.Response) -> str:
    """Both SGLang error bodies: its ValueError one and its rewritten validation-error one."""
    payload = response.json()
    return str(payload["error"]["message"] if "error" in payload else payload["message"])


def cached(client: httpx.Client, ids: list[int]) -> int:
    """`cached_tokens` of a one-label request for `ids`."""
    return int(client.post("/generate", json=body(ids, [1])).json()["meta_info"]["cached_tokens"])

"""What the fake answers for one `/generate` item: SGLang's `meta_info` with its log-prob lists (label
log-probs in an order that is never the one requested), an abort's answer, and deliberate damage."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any, Literal

from fake_sglang.http import dumps
from fake_sglang.logprobs import LogprobFn, Scorer, fake_token_text
from fake_sglang.protocol import DEFAULT_MAX_NEW_TOKENS, Item

Malformed = Literal["missing_logprobs", "missing_meta", "not_json", "duplicate_logprob", "reversed_batch"]


def _entry(lp: float | None, token_id: int, with_text: bool) -> list[Any]:
    return [lp, token_id, fake_token_text(token_id) if with_text else None]


def _shuffled(label_ids: list[int], seed: int) -> list[int]:
    """A per-request order that is never the requested one, so clients cannot rely on order."""
    order = list(label_ids)
    random.Random(seed).shuffle(order)
    if len(order) > 1 and order == label_ids:
        order = order[1:] + order[:1]
    return order


def _output_choose(item: Item, score: Scorer, vocab_size: int) -> int:
    """Greedy choice among the labels (the model "answers" its best label), else a hashed token."""
    if item.label_ids:
        return max(item.label_ids, key=score)
    return score.seed() % vocab_size


def _top_entries(item: Item, out_tok: int, out_lp: float, score: Scorer, vocab_size: int) -> list[list[Any]]:
    """Top-k consistent with greedy decoding: the chosen token first, then lower-scored candidates."""
    seed = score.seed()
    candidates = {(seed >> (i % 48)) * (i + 1) % vocab_size for i in range(4 * item.top_logprobs_num)}
    candidates.update(item.label_ids or ())
    ranked = sorted(((score(t), t) for t in candidates if t != out_tok), reverse=True)
    below = [(lp, t) for lp, t in ranked if lp <= out_lp]
    picked = [(out_lp, out_tok), *below][: item.top_logprobs_num]
    return [_entry(lp, t, item.text_in_logprobs) for lp, t in picked]


def _input_logprobs(item: Item, fn: LogprobFn | None, clamped: frozenset[int]) -> list[list[Any]]:
    """Prompt-token log-probs from ``logprob_start_len``; the very first prompt token has none."""
    entries = []
    for pos in range(item.logprob_start_len, len(item.ids)):
        tok = item.ids[pos]
        lp = None if pos == 0 else Scorer(item.ids[:pos], fn, clamped)(tok)
        entries.append(_entry(lp, tok, item.text_in_logprobs))
    return entries


@dataclass(slots=True)
class Outcome:
    """How one item ended: its cache hit at prefill, or an abort before prefill."""

    cached: int = 0
    aborted: bool = False


def abort_result(item: Item, started: float, report_cached: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "id": item.rid,
        "finish_reason": {"type": "abort", "message": "Abort before prefill"},
        "prompt_tokens": len(item.ids),
        "completion_tokens": 0,
    }
    if report_cached:
        meta["cached_tokens"] = 0
    meta["e2e_latency"] = time.monotonic() - started
    if item.return_logprob:
        meta.update(
            input_token_logprobs=[],
            output_token_logprobs=[],
            input_top_logprobs=[],
            output_top_logprobs=[],
            input_token_ids_logprobs=[],
            output_token_ids_logprobs=[],
        )
    return {"text": "", "output_ids": [], "meta_info": meta}


def damage(item: dict[str, Any], mode: Malformed) -> None:
    """Break one item's answer the way `mode` says (the client must refuse it)."""
    meta = item["meta_info"]
    if mode == "missing_meta":
        del item["meta_info"]
    elif mode == "duplicate_logprob":
        for position in meta.get("output_token_ids_logprobs") or []:
            position.append(list(position[0]))
    elif mode == "missing_logprobs":
        meta.pop("output_token_ids_logprobs", None)


@dataclass(frozen=True)
class Overrides:
    """The server's per-test controls that shape an answer."""

    vocab_size: int
    logprob_fn: LogprobFn | None
    clamped: frozenset[int]
    report_cached_tokens: bool


def completion(item: Item, cached: int, started: float, overrides: Overrides) -> dict[str, Any]:
    """One item's answer as SGLang sends it: the greedy output token and its `meta_info`."""
    fn, clamped = overrides.logprob_fn, overrides.clamped
    score = Scorer(item.ids, fn, clamped)
    max_new = item.sampling.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
    out_ids = [] if max_new == 0 else [_output_choose(item, score, overrides.vocab_size)]
    finish: dict[str, Any] = (
        {"type": "length", "length": len(out_ids)} if max_new in (0, 1) else {"type": "stop", "matched": out_ids[0]}
    )
    meta: dict[str, Any] = {
        "id": item.rid,
        "finish_reason": finish,
        "prompt_tokens": len(item.ids),
        "weight_version": "default",
        "completion_tokens": len(out_ids),
    }
    if overrides.report_cached_tokens:
        meta["cached_tokens"] = cached
    meta["e2e_latency"] = time.monotonic() - started
    if item.return_logprob:
        meta.update(_logprob_meta(item, out_ids, score, overrides))
    return {"text": "".join(map(fake_token_text, out_ids)), "output_ids": out_ids, "meta_info": meta}


def _logprob_meta(item: Item, out_ids: list[int], score: Scorer, overrides: Overrides) -> dict[str, Any]:
    text = item.text_in_logprobs
    out_lps = [score(t) for t in out_ids]
    if item.label_ids is None:
        ids_logprobs: list[Any] = [None] * len(out_ids)
    else:
        order = _shuffled(item.label_ids, score.seed() ^ len(item.label_ids))
        ids_logprobs = [[_entry(score(t), t, text) for t in order] for _ in out_ids]
    top: list[Any] = [[] for _ in out_ids]
    if item.top_logprobs_num and out_ids:
        top = [_top_entries(item, out_ids[0], out_lps[0], score, overrides.vocab_size)]
    started = item.logprob_start_len >= 0
    return {
        "input_token_logprobs": _input_logprobs(item, overrides.logprob_fn, overrides.clamped) if started else [],
        "output_token_logprobs": [_entry(lp, t, text) for lp, t in zip(out_lps, out_ids, strict=True)],
        "input_top_logprobs": [None] * (len(item.ids) - item.logprob_start_len) if started else [],
        "output_top_logprobs": top,
        "input_token_ids_logprobs": [None] * (len(item.ids) - item.logprob_start_len) if started else [],
        "output_token_ids_logprobs": ids_logprobs,
    }


def answer_encode(
    result: dict[str, Any] | list[dict[str, Any]], malformed: Malformed | None
) -> tuple[int, bytes, bytes]:
    """Serialize an answer, damaged on purpose when ``malformed`` asks for it."""
    if malformed == "not_json":
        return 200, b"<html><body>502 Bad Gateway</body></html>", b"text/html"
    if malformed == "reversed_batch" and isinstance(result, list):
        result.reverse()
    elif malformed is not None:
        for item in result if isinstance(result, list) else [result]:
            damage(item, malformed)
    return 200, dumps(result), b"application/json"

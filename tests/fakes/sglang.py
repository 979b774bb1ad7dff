"""A protocol-faithful fake of SGLang 0.5.23's native HTTP API, served for real on loopback.

Why a fake and not mocks: the backend client must be exercised over real HTTP (keep-alive pools,
connection refusals, slow answers, aborts, concurrency limits) and against SGLang's exact wire
format, including its awkward parts (selected-token log-probs in any order, a possibly absent
``cached_tokens``, batched answers as a JSON list, 400s for unknown sampling keys).

Log-probs are a pure function of the prompt ids and the token id (:func:`fake_logprob`), so other
tests can predict every answer without a model. The prefix cache is a real radix tree, so
``cached_tokens`` tells the truth about which prompts were seen before.

Run standalone for benchmarks: ``python -m tests.fakes.sglang --port 30000 [--delay 0]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import random
import signal
import socket
import sys
import threading
import time
import uuid
from array import array
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, Self, TypedDict

import uvicorn

try:  # orjson is optional: faster on the benchmark path, identical JSON for our values.
    import orjson

    def _dumps(value: Any) -> bytes:
        return bytes(orjson.dumps(value))

    _loads: Callable[[bytes], Any] = orjson.loads
except ImportError:  # pragma: no cover - depends on the environment

    def _dumps(value: Any) -> bytes:
        return json.dumps(value, separators=(",", ":")).encode()

    _loads = json.loads

__all__ = [
    "CLAMPED_LOGPROB",
    "DEFAULT_VOCAB_SIZE",
    "LOGPROB_MAX",
    "LOGPROB_MIN",
    "FakeSGLang",
    "LogprobFn",
    "Malformed",
    "PrefixCache",
    "RequestRecord",
    "fake_logprob",
    "fake_token_text",
    "main",
]

DEFAULT_VOCAB_SIZE = 151936
LOGPROB_MIN = -12.0
LOGPROB_MAX = -0.05
CLAMPED_LOGPROB = -9999.0
DEFAULT_MAX_NEW_TOKENS = 128  # SamplingParams' default in SGLang

LogprobFn = Callable[[Sequence[int], int], float]
Malformed = Literal["missing_logprobs", "missing_meta", "not_json", "duplicate_logprob", "reversed_batch"]
ASGIReceive = Callable[[], Awaitable[dict[str, Any]]]
ASGISend = Callable[[dict[str, Any]], Awaitable[None]]

# GenerateReqInput fields a client may legitimately send. SGLang itself ignores unknown top-level keys
# (FastAPI/pydantic dataclass); the fake rejects them so a typo in our client cannot go unnoticed.
# `model` is no GenerateReqInput field, but the SGLang gateway (smg) adds it to every body it forwards
# and SGLang ignores it, so it passes here too.
_TOP_LEVEL_KEYS = frozenset({
    "model",
    "text", "input_ids", "sampling_params", "rid", "return_logprob", "logprob_start_len", "top_logprobs_num",
    "token_ids_logprob", "return_text_in_logprobs", "stream", "log_metrics", "return_hidden_states",
    "lora_path", "lora_id", "session_params", "custom_logit_processor", "bootstrap_host", "bootstrap_port",
    "bootstrap_room", "bootstrap_pair_key", "data_parallel_rank", "priority", "no_logs", "extra_key",
    "custom_labels", "return_bytes", "return_entropy", "routed_dp_rank", "conversation_id", "background",
})
# Accepted by SGLang but meaningless for a text-free fake; rejected so nobody believes they work here.
_UNSUPPORTED_KEYS = ("input_embeds", "image_data", "video_data", "audio_data", "modalities")
# SGLang's SamplingParams constructor arguments: anything else raises before the request is scheduled.
_SAMPLING_KEYS = frozenset({
    "max_new_tokens", "stop", "stop_token_ids", "temperature", "top_p", "top_k", "min_p", "frequency_penalty",
    "presence_penalty", "repetition_penalty", "min_new_tokens", "n", "json_schema", "regex", "ebnf",
    "structural_tag", "ignore_eos", "skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim",
    "custom_params", "stream_interval", "logit_bias", "sampling_seed",
})


# --------------------------------------------------------------------------------------------------
# Deterministic log-probs
# --------------------------------------------------------------------------------------------------


def _ids_bytes(ids: Sequence[int]) -> bytes:
    """Fixed-width little-endian bytes, so the hash is identical on every machine and process."""
    packed = array("q", ids)
    if sys.byteorder == "big":  # pragma: no cover - no big-endian CI
        packed.byteswap()
    return packed.tobytes()


def _prompt_hasher(ids: Sequence[int]) -> Any:
    """Hash state of the prompt alone; copied per token so a request hashes its prompt once."""
    hasher = hashlib.blake2b(digest_size=8, person=b"fake-sglang")
    hasher.update(_ids_bytes(ids))
    return hasher


def _logprob_from(prompt_hasher: Any, token_id: int) -> float:
    hasher = prompt_hasher.copy()
    hasher.update(token_id.to_bytes(8, "little", signed=True))
    unit = int.from_bytes(hasher.digest(), "little") / 2**64
    return LOGPROB_MIN + unit * (LOGPROB_MAX - LOGPROB_MIN)


def fake_logprob(ids: Sequence[int], token_id: int) -> float:
    """The fake model's log-prob of ``token_id`` right after the prompt ``ids``, in [-12, -0.05].

    Pure and process-independent (blake2b, never ``hash()``), so tests can predict the answer of any
    request: the server returns exactly these floats (unless a per-server override is set).
    """
    return _logprob_from(_prompt_hasher(ids), token_id)


def fake_token_text(token_id: int) -> str:
    """Text the fake reports for a token; it has no tokenizer, so the id is spelled out."""
    return f"<tok{token_id}>"


class _Scorer:
    """Log-probs of one prompt, honouring the server's per-test overrides."""

    __slots__ = ("_clamped", "_fn", "_hasher", "_ids")

    def __init__(self, ids: Sequence[int], fn: LogprobFn | None, clamped: frozenset[int]) -> None:
        self._ids = ids
        self._fn = fn
        self._clamped = clamped
        self._hasher = _prompt_hasher(ids)

    def __call__(self, token_id: int) -> float:
        if token_id in self._clamped:
            return CLAMPED_LOGPROB
        if self._fn is not None:
            return float(self._fn(self._ids, token_id))
        return _logprob_from(self._hasher, token_id)

    def seed(self) -> int:
        """A per-prompt seed, for orders that must look arbitrary yet repeat exactly."""
        return int.from_bytes(self._hasher.digest(), "little")


# --------------------------------------------------------------------------------------------------
# Prefix cache
# --------------------------------------------------------------------------------------------------


class _Node:
    __slots__ = ("children", "key")

    def __init__(self, key: list[int]) -> None:
        self.key = key
        self.children: dict[int, _Node] = {}


def _common_len(key: list[int], ids: Sequence[int], start: int) -> int:
    limit = min(len(key), len(ids) - start)
    for i in range(limit):
        if key[i] != ids[start + i]:
            return i
    return limit


class PrefixCache:
    """A token radix tree like SGLang's RadixCache (page size 1), bounded in stored tokens.

    Eviction is coarse on purpose (the whole tree is dropped when full): tests need truthful hits,
    not SGLang's LRU policy, and benchmarks need it cheap.
    """

    def __init__(self, capacity_tokens: int = 2_000_000) -> None:
        self.capacity_tokens = capacity_tokens
        self.clear()

    def clear(self) -> None:
        self._root = _Node([])
        self.size = 0

    def match(self, ids: Sequence[int]) -> int:
        """Length of the longest prefix of ``ids`` already in the tree."""
        node, pos, n = self._root, 0, len(ids)
        while pos < n:
            child = node.children.get(ids[pos])
            if child is None:
                break
            k = len(child.key)
            if ids[pos:pos + k] != child.key:
                return pos + _common_len(child.key, ids, pos)
            node, pos = child, pos + k
        return pos

    def insert(self, ids: Sequence[int]) -> None:
        """Add a computed prompt; shared prefixes are stored once."""
        if self.size + len(ids) > self.capacity_tokens:
            self.clear()
        node, pos, n = self._root, 0, len(ids)
        while pos < n:
            child = node.children.get(ids[pos])
            if child is None:
                node.children[ids[pos]] = _Node(list(ids[pos:]))
                self.size += n - pos
                return
            k = len(child.key)
            if ids[pos:pos + k] == child.key:
                node, pos = child, pos + k
                continue
            common = _common_len(child.key, ids, pos)
            if common == n - pos:
                return  # the prompt ends inside this edge: already covered
            self._split(node, child, common)
            rest = list(ids[pos + common:])
            node.children[ids[pos]].children[rest[0]] = _Node(rest)
            self.size += len(rest)
            return

    @staticmethod
    def _split(parent: _Node, child: _Node, at: int) -> None:
        middle = _Node(child.key[:at])
        child.key = child.key[at:]
        middle.children[child.key[0]] = child
        parent.children[middle.key[0]] = middle


# --------------------------------------------------------------------------------------------------
# Request parsing and validation
# --------------------------------------------------------------------------------------------------


class _BadRequest(Exception):
    """A 400; ``validation`` selects FastAPI's validation-error body instead of SGLang's ValueError body."""

    def __init__(self, message: str, *, validation: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.validation = validation


@dataclass(slots=True)
class _Item:
    """One prompt of a /generate call (a batched call has several)."""

    ids: list[int]
    sampling: dict[str, Any]
    return_logprob: bool
    logprob_start_len: int
    top_logprobs_num: int
    label_ids: list[int] | None
    rid: str
    text_in_logprobs: bool


def _is_int(value: Any) -> bool:
    return type(value) is int


def _check_ids(ids: Any, what: str, vocab_size: int, *, allow_empty: bool = False) -> list[int]:
    if not isinstance(ids, list) or not set(map(type, ids)) <= {int}:  # C-speed check; rejects bools and floats
        raise _BadRequest(f"{what} must be a list of integers", validation=True)
    if not ids and not allow_empty:
        raise _BadRequest(f"{what} is empty")
    if ids and (min(ids) < 0 or max(ids) >= vocab_size):
        bad = next(t for t in ids if t < 0 or t >= vocab_size)
        raise _BadRequest(f"Token id {bad} in {what} is out of vocabulary (vocab size {vocab_size}).")
    return ids


def _number(sp: dict[str, Any], key: str, default: float) -> float:
    value = sp.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _BadRequest(f"{key} must be a number, got {value!r}.")
    return float(value)


def _check_sampling(sp: Any) -> dict[str, Any]:
    """SamplingParams(**sp) then .verify(), as SGLang's tokenizer manager does before scheduling."""
    if sp is None:
        return {}
    if not isinstance(sp, dict):
        raise _BadRequest("sampling_params must be an object", validation=True)
    unknown = sorted(set(sp) - _SAMPLING_KEYS)
    if unknown:
        raise _BadRequest(f"SamplingParams.__init__() got an unexpected keyword argument '{unknown[0]}'")
    _check_sampling_ranges(sp)
    return sp


def _check_sampling_ranges(sp: dict[str, Any]) -> None:
    max_new = sp.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
    if max_new is not None and (not _is_int(max_new) or max_new < 0):
        raise _BadRequest(f"max_new_tokens must be at least 0, got {max_new}.")
    checks: list[tuple[bool, str]] = [
        (_number(sp, "temperature", 1.0) < 0, "temperature must be non-negative"),
        (not 0 < _number(sp, "top_p", 1.0) <= 1, "top_p must be in (0, 1]"),
        (not 0 <= _number(sp, "min_p", 0.0) <= 1, "min_p must be in [0, 1]"),
        (not -2 <= _number(sp, "frequency_penalty", 0.0) <= 2, "frequency_penalty must be in [-2, 2]"),
        (not -2 <= _number(sp, "presence_penalty", 0.0) <= 2, "presence_penalty must be in [-2, 2]"),
        (not 0 < _number(sp, "repetition_penalty", 1.0) <= 2, "repetition_penalty must be in (0, 2]"),
    ]
    top_k = sp.get("top_k", -1)
    checks.append((not _is_int(top_k) or (top_k < 1 and top_k != -1), "top_k must be -1 (disable) or at least 1"))
    min_new = sp.get("min_new_tokens", 0)
    checks.append((not _is_int(min_new) or min_new < 0, "min_new_tokens must be at least 0"))
    if _is_int(min_new) and _is_int(max_new) and min_new > max_new:
        checks.append((True, "min_new_tokens must be in [0, max_new_tokens]"))
    grammars = [k for k in ("json_schema", "regex", "ebnf") if sp.get(k) is not None]
    checks.append((len(grammars) > 1, "Only one of regex, json_schema, or ebnf can be set."))
    checks.append((sp.get("n", 1) != 1, "the fake supports n=1 only"))
    for failed, message in checks:
        if failed:
            raise _BadRequest(message)


def _per_item(body: dict[str, Any], key: str, size: int, default: Any, *, batched: bool,
              nested: bool = False) -> list[Any]:
    """Broadcast a scalar (or, for ``nested`` keys, a flat list) to every batch item; check list lengths."""
    value = body.get(key, default)
    nested_ok = not nested or (bool(value) and all(isinstance(v, list) for v in value))
    per_item = batched and isinstance(value, list) and nested_ok
    if not per_item:
        return [value] * size
    if len(value) != size:
        raise _BadRequest(f"The length of {key} ({len(value)}) does not match the batch size ({size}).")
    return list(value)


def _check_top_level(body: Any) -> None:
    if not isinstance(body, dict):
        raise _BadRequest("the request body must be a JSON object", validation=True)
    unknown = sorted(set(body) - _TOP_LEVEL_KEYS - set(_UNSUPPORTED_KEYS))
    if unknown:
        raise _BadRequest(f"unknown GenerateReqInput field(s): {', '.join(unknown)}", validation=True)
    for key in _UNSUPPORTED_KEYS:
        if body.get(key) is not None:
            raise _BadRequest(f"the fake does not support {key}")
    if body.get("text") is not None:
        raise _BadRequest("fake supports input_ids only")
    if body.get("stream"):
        raise _BadRequest("the fake does not stream; send stream=false")
    if body.get("input_ids") is None:
        raise _BadRequest("Either text, input_ids or input_embeds should be provided.")


def _parse_generate(body: Any, vocab_size: int, context_length: int) -> tuple[list[_Item], bool]:
    """Validate a /generate body; return its items and whether the answer must be a list."""
    _check_top_level(body)
    input_ids = body["input_ids"]
    batched = isinstance(input_ids, list) and bool(input_ids) and isinstance(input_ids[0], list)
    prompts = input_ids if batched else [input_ids]
    size = len(prompts)
    rids = _rids(body.get("rid"), size, batched)
    columns = {
        "sampling": _per_item(body, "sampling_params", size, None, batched=batched),
        "return_logprob": _per_item(body, "return_logprob", size, False, batched=batched),
        "start": _per_item(body, "logprob_start_len", size, -1, batched=batched),
        "top": _per_item(body, "top_logprobs_num", size, 0, batched=batched),
        "labels": _per_item(body, "token_ids_logprob", size, None, batched=batched, nested=True),
    }
    text_in_logprobs = bool(body.get("return_text_in_logprobs", False))
    items = []
    for i, prompt in enumerate(prompts):
        what = f"input_ids[{i}]" if batched else "input_ids"
        ids = _check_ids(prompt, what, vocab_size)
        item = _Item(ids=ids, sampling=_check_sampling(columns["sampling"][i]),
                     return_logprob=_check_flag(columns["return_logprob"][i], "return_logprob"),
                     logprob_start_len=_check_start(columns["start"][i], len(ids)),
                     top_logprobs_num=_check_top(columns["top"][i]),
                     label_ids=_check_labels(columns["labels"][i], vocab_size), rid=rids[i],
                     text_in_logprobs=text_in_logprobs)
        _check_context(item, context_length)
        items.append(item)
    return items, batched


def _rids(rid: Any, size: int, batched: bool) -> list[str]:
    """SGLang's GenerateReqInput._normalize_rid: a batch takes one rid per item, or one string that
    becomes ``<rid>_0 … <rid>_{n-1}``; duplicates are refused."""
    if rid is None:
        return [uuid.uuid4().hex for _ in range(size)]
    if not batched:
        if not isinstance(rid, str):
            raise _BadRequest("The rid should be a string.")
        return [rid]
    if isinstance(rid, str):
        return [f"{rid}_{i}" for i in range(size)]
    if not isinstance(rid, list) or not all(isinstance(r, str) for r in rid):
        raise _BadRequest("The rid should be a string or a list of strings.")
    if len(rid) != size:
        raise _BadRequest("The specified rids length mismatch with the batch_size for batch processing.")
    if len(set(rid)) != len(rid):
        duplicates = sorted({r for r in rid if rid.count(r) > 1})
        raise _BadRequest(f"Duplicate request IDs detected within the request: {duplicates}")
    return list(rid)


def _check_flag(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise _BadRequest(f"{key} must be a boolean", validation=True)
    return value


def _check_start(value: Any, prompt_len: int) -> int:
    if not _is_int(value) or value < -1:
        raise _BadRequest(f"logprob_start_len must be -1 or a non-negative integer, got {value!r}")
    if value >= prompt_len:
        raise _BadRequest(f"logprob_start_len ({value}) is superior or equal to the input length ({prompt_len}).")
    return int(value)


def _check_top(value: Any) -> int:
    if not _is_int(value) or value < 0:
        raise _BadRequest(f"top_logprobs_num must be a non-negative integer, got {value!r}")
    return int(value)


def _check_labels(value: Any, vocab_size: int) -> list[int] | None:
    if value is None:
        return None
    return _check_ids(value, "token_ids_logprob", vocab_size, allow_empty=True)


def _check_context(item: _Item, context_length: int) -> None:
    n = len(item.ids)
    if n >= context_length:
        raise _BadRequest(f"The input ({n} tokens) is longer than the model's context length "
                          f"({context_length} tokens).")
    max_new = item.sampling.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS) or 0
    if n + max_new >= context_length:
        raise _BadRequest(f"Requested token count exceeds the model's maximum context length of {context_length} "
                          f"tokens. You requested a total of {n + max_new} tokens: {n} tokens from the input "
                          f"messages and {max_new} tokens for the completion.")


# --------------------------------------------------------------------------------------------------
# Answers
# --------------------------------------------------------------------------------------------------


def _entry(lp: float | None, token_id: int, with_text: bool) -> list[Any]:
    return [lp, token_id, fake_token_text(token_id) if with_text else None]


def _shuffled(label_ids: list[int], seed: int) -> list[int]:
    """A per-request order that is never the requested one, so clients cannot rely on order."""
    order = list(label_ids)
    random.Random(seed).shuffle(order)
    if len(order) > 1 and order == label_ids:
        order = order[1:] + order[:1]
    return order


def _choose_output(item: _Item, score: _Scorer, vocab_size: int) -> int:
    """Greedy choice among the labels (the model "answers" its best label), else a hashed token."""
    if item.label_ids:
        return max(item.label_ids, key=score)
    return score.seed() % vocab_size


def _top_entries(item: _Item, out_tok: int, out_lp: float, score: _Scorer, vocab_size: int) -> list[list[Any]]:
    """Top-k consistent with greedy decoding: the chosen token first, then lower-scored candidates."""
    seed = score.seed()
    candidates = {(seed >> (i % 48)) * (i + 1) % vocab_size for i in range(4 * item.top_logprobs_num)}
    candidates.update(item.label_ids or ())
    ranked = sorted(((score(t), t) for t in candidates if t != out_tok), reverse=True)
    below = [(lp, t) for lp, t in ranked if lp <= out_lp]
    picked = [(out_lp, out_tok), *below][: item.top_logprobs_num]
    return [_entry(lp, t, item.text_in_logprobs) for lp, t in picked]


def _input_logprobs(item: _Item, fn: LogprobFn | None, clamped: frozenset[int]) -> list[list[Any]]:
    """Prompt-token log-probs from ``logprob_start_len``; the very first prompt token has none."""
    entries = []
    for pos in range(item.logprob_start_len, len(item.ids)):
        tok = item.ids[pos]
        lp = None if pos == 0 else _Scorer(item.ids[:pos], fn, clamped)(tok)
        entries.append(_entry(lp, tok, item.text_in_logprobs))
    return entries


@dataclass(slots=True)
class _Outcome:
    """How one item ended: its cache hit at prefill, or an abort before prefill."""

    cached: int = 0
    aborted: bool = False


def _abort_result(item: _Item, started: float, report_cached: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {"id": item.rid, "finish_reason": {"type": "abort", "message": "Abort before prefill"},
                            "prompt_tokens": len(item.ids), "completion_tokens": 0}
    if report_cached:
        meta["cached_tokens"] = 0
    meta["e2e_latency"] = time.monotonic() - started
    if item.return_logprob:
        meta.update(input_token_logprobs=[], output_token_logprobs=[], input_top_logprobs=[], output_top_logprobs=[],
                    input_token_ids_logprobs=[], output_token_ids_logprobs=[])
    return {"text": "", "output_ids": [], "meta_info": meta}


# --------------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------------


class RequestRecord(TypedDict):
    """One /generate call as the fake saw it; times are ``time.monotonic()`` seconds."""

    path: str
    body: Any
    t_start: float
    t_end: float | None
    status: int | None


@dataclass(slots=True)
class _Call:
    """An in-flight /generate call, reachable by any of its rids so /abort_request can end it."""

    rids: list[str]
    aborted: set[str] = field(default_factory=set)
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def abort(self, rid: str) -> None:
        self.aborted.add(rid)
        if self.aborted.issuperset(self.rids):
            self.done.set()


# --------------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------------


class FakeSGLang:
    """The fake server: an ASGI app run by uvicorn in a background thread on 127.0.0.1.

    Controls (plain attributes, settable while it runs): ``delay``, ``fail_status``, ``fail_after``,
    ``malformed``, ``healthy``, ``api_key``, ``report_cached_tokens``, ``logprob_fn``, ``clamp_token_ids``.
    Records: ``requests`` (unless ``keep_records`` is off), ``aborted``, ``disconnected``, ``in_flight``,
    ``max_in_flight``, ``waiting_calls``, ``generate_calls``.
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, vocab_size: int = DEFAULT_VOCAB_SIZE,
                 model_path: str = "fake/Qwen3-0.6B", served_model_name: str | None = None,
                 context_length: int = 32768, api_key: str | None = None, delay: float = 0.0,
                 cache_capacity_tokens: int = 2_000_000, keep_alive_s: float = 75.0, keep_records: bool = True) -> None:
        self.host = host
        self.port = port
        self.vocab_size = vocab_size
        self.model_path = model_path
        self.served_model_name = served_model_name or model_path
        self.context_length = context_length
        self.keep_alive_s = keep_alive_s
        self.keep_records = keep_records  # off for long benchmarks: each record holds a whole prompt
        self.cache = PrefixCache(cache_capacity_tokens)
        self._initial_api_key = api_key
        self._initial_delay = delay
        self._routes = self._route_table()
        self._lock = threading.Lock()
        self._by_rid: dict[str, _Call] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._uvicorn: uvicorn.Server | None = None
        self._serve_task: asyncio.Task[None] | None = None
        self.requests: list[RequestRecord] = []
        self.aborted: list[str] = []
        self.disconnected: list[str] = []
        self.in_flight = 0  # live gauges, never reset: calls may straddle a reset
        self.waiting_calls = 0
        self._reset_controls()
        self._reset_records()

    # ---- controls and records -------------------------------------------------------------------

    def _reset_controls(self) -> None:
        self.api_key: str | None = self._initial_api_key
        self.delay: float = self._initial_delay
        self.fail_status: int | None = None
        self.fail_after: int | None = None
        self.malformed: Malformed | None = None
        self.healthy = True
        self.report_cached_tokens = True
        self.logprob_fn: LogprobFn | None = None
        self.clamp_token_ids: set[int] = set()

    def _reset_records(self) -> None:
        with self._lock:
            self.requests.clear()
            self.aborted.clear()
            self.disconnected.clear()
            self.max_in_flight = self.in_flight
            self.generate_calls = 0

    def reset(self, *, controls: bool = True, cache: bool = True) -> None:
        """Forget records (and by default the controls and the prefix cache) between tests."""
        self._reset_records()
        if controls:
            self._reset_controls()
        if cache:
            self._on_loop(self.cache.clear)

    def predict_logprob(self, ids: Sequence[int], token_id: int) -> float:
        """What this server (with its overrides) answers for ``token_id`` after ``ids``."""
        return _Scorer(ids, self.logprob_fn, frozenset(self.clamp_token_ids))(token_id)

    def wait_in_flight(self, count: int, timeout: float = 5.0) -> None:
        """Block the calling thread until ``count`` /generate calls are past validation and abortable.

        ``in_flight`` alone is not enough: it counts a call from its arrival, before its rid is known.
        """
        deadline = time.monotonic() + timeout
        while self.waiting_calls < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {self.waiting_calls} of {count} calls in flight after {timeout}s")
            time.sleep(0.002)

    def wait_idle(self, timeout: float = 5.0) -> None:
        """Block the calling thread until no /generate call is in flight: how a test sees that calls whose
        client went away were ended (aborted on disconnect) rather than left to run out their delay."""
        deadline = time.monotonic() + timeout
        while self.in_flight:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.in_flight} calls still in flight after {timeout}s")
            time.sleep(0.002)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # ---- lifecycle ------------------------------------------------------------------------------

    def start(self) -> Self:
        """Bind (port 0 = ephemeral) and serve in a daemon thread; returns once connections are accepted."""
        if self._thread is None:
            self._loop = _new_loop()
            self._thread = threading.Thread(target=self._loop.run_forever, name="fake-sglang", daemon=True)
            self._thread.start()
        self._run(self._listen())
        return self

    def dead(self) -> None:
        """Die like a crashed SGLang: stop listening and reset open connections (new ones are refused)."""
        if self._uvicorn is not None:
            self._run(self._kill())

    def revive(self) -> None:
        """Listen again on the same port after :meth:`dead`, keeping records and cache."""
        self.start()

    def stop(self) -> None:
        """Kill the server and its thread; safe to call twice."""
        if self._loop is None or self._thread is None:
            return
        self.dead()
        self._run(_cancel_other_tasks())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()
        self._loop, self._thread = None, None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _run(self, coro: Awaitable[Any], timeout: float = 15.0) -> Any:
        assert self._loop is not None, "the fake is not started"
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)  # type: ignore[arg-type]

    def _on_loop(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the server loop (or right here when it is not running) to avoid racing handlers."""
        if self._loop is None or not self._loop.is_running():
            fn()
            return

        async def call() -> None:
            fn()

        self._run(call())

    async def _listen(self) -> None:
        if self._uvicorn is not None:
            return
        sock = _bind(self.host, self.port)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self, log_config=None, log_level="warning", access_log=False, lifespan="off",
                                http="h11", proxy_headers=False, timeout_keep_alive=int(self.keep_alive_s),
                                backlog=4096)
        server = uvicorn.Server(config)
        self._uvicorn = server
        self._serve_task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
        while not server.started:
            if self._serve_task.done():
                self._uvicorn = None
                self._serve_task.result()
                raise RuntimeError("the fake SGLang server exited during startup")
            await asyncio.sleep(0.002)

    async def _kill(self) -> None:
        server, task = self._uvicorn, self._serve_task
        assert server is not None and task is not None
        server.should_exit = server.force_exit = True
        for listener in getattr(server, "servers", []):
            listener.close()
        for connection in list(server.server_state.connections):
            transport = getattr(connection, "transport", None)
            if transport is not None:
                transport.abort()
        for call in list(self._by_rid.values()):
            call.done.set()  # in-flight handlers wake up and write into closed sockets
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, timeout=5)
        self._uvicorn, self._serve_task = None, None

    # ---- ASGI -----------------------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: ASGIReceive, send: ASGISend) -> None:
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if self.api_key and not _auth_exempt(path) and not _authorized(scope, self.api_key):
            await _read_body(receive)  # drain, so the keep-alive connection stays usable
            await _respond(send, 401, {"error": "Unauthorized"})
            return
        route = self._routes.get((method, path))
        if route is None:
            await _read_body(receive)
            known = any(p == path for _, p in self._routes)
            status, detail = (405, "Method Not Allowed") if known else (404, "Not Found")
            await _respond(send, status, {"detail": detail})
            return
        await route(scope, receive, send)

    def _route_table(self) -> dict[tuple[str, str], Callable[[dict[str, Any], ASGIReceive, ASGISend],
                                                              Awaitable[None]]]:
        return {
            ("POST", "/generate"): self._generate,
            ("PUT", "/generate"): self._generate,
            ("POST", "/abort_request"): self._abort_request,
            ("GET", "/health"): self._health,
            ("GET", "/health_generate"): self._health,
            ("GET", "/model_info"): self._model_info,
            ("GET", "/get_model_info"): self._model_info,
            ("GET", "/v1/models"): self._models,
            ("GET", "/server_info"): self._server_info,
            ("GET", "/get_server_info"): self._server_info,
        }

    async def _health(self, scope: dict[str, Any], receive: ASGIReceive, send: ASGISend) -> None:
        await _respond_raw(send, 200 if self.healthy else 503, b"", b"text/plain")

    async def _model_info(self, scope: dict[str, Any], receive: ASGIReceive, send: ASGISend) -> None:
        await _respond(send, 200, {"model_path": self.model_path, "tokenizer_path": self.model_path,
                                   "is_generation": True, "preferred_sampling_params": None,
                                   "weight_version": "default"})

    async def _server_info(self, scope: dict[str, Any], receive: ASGIReceive, send: ASGISend) -> None:
        """A subset of what SGLang merges here (its ServerArgs, scheduler info, per-rank internal states,
        version): the fields a gateway or an operator reads to identify the worker."""
        await _respond(send, 200, {"model_path": self.model_path, "tokenizer_path": self.model_path,
                                   "served_model_name": self.served_model_name, "host": self.host, "port": self.port,
                                   "context_length": self.context_length, "disable_radix_cache": False,
                                   "max_total_num_tokens": self.cache.capacity_tokens,
                                   "internal_states": [{"last_gen_throughput": 0.0}], "version": "0.5.23"})

    async def _models(self, scope: dict[str, Any], receive: ASGIReceive, send: ASGISend) -> None:
        card = {"id": self.served_model_name, "object": "model", "created": int(time.time()), "owned_by": "sglang",
                "root": self.served_model_name, "max_model_len": self.context_length}
        await _respond(send, 200, {"object": "list", "data": [card]})

    async def _abort_request(self, scope: dict[str, Any], receive: ASGIReceive, send: ASGISend) -> None:
        """SGLang's AbortReq: ``rid`` one string (no list), ``abort_all`` a boolean; 200 even for a rid it
        does not know. A batch's base rid does not abort its ``<rid>_<i>`` items: with one tokenizer
        worker SGLang's TokenizerManager.abort_request drops a rid it holds no state for."""
        try:
            body = _loads(await _read_body(receive))
        except ValueError:
            await _respond(send, 400, _validation_error("the request body is not valid JSON"))
            return
        rid = body.get("rid") if isinstance(body, dict) else None
        abort_all = body.get("abort_all", False) if isinstance(body, dict) else None
        if not isinstance(body, dict) or not isinstance(rid, str | None) or not isinstance(abort_all, bool):
            await _respond(send, 400, _validation_error("AbortReq takes rid (a string) and abort_all (a boolean)"))
            return
        for one in list(self._by_rid) if abort_all else [rid] if rid else []:
            self._abort(one)
        await _respond_raw(send, 200, b"", b"text/plain")

    def _abort(self, rid: str) -> None:
        with self._lock:
            self.aborted.append(rid)
        call = self._by_rid.get(rid)
        if call is not None:
            call.abort(rid)

    # ---- /generate ------------------------------------------------------------------------------

    async def _generate(self, scope: dict[str, Any], receive: ASGIReceive, send: ASGISend) -> None:
        record: RequestRecord = {"path": scope["path"], "body": None, "t_start": time.monotonic(), "t_end": None,
                                 "status": None}
        with self._lock:
            if self.keep_records:
                self.requests.append(record)
            index = self.generate_calls
            self.generate_calls += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            status, payload, content_type = await self._generate_answer(record, index, receive)
            record["status"], record["t_end"] = status, time.monotonic()
            await _respond_raw(send, status, payload, content_type)
        finally:
            with self._lock:
                self.in_flight -= 1

    async def _generate_answer(self, record: RequestRecord, index: int,
                               receive: ASGIReceive) -> tuple[int, bytes, bytes]:
        raw = await _read_body(receive)
        try:
            body = _loads(raw)
        except ValueError:
            record["body"] = raw
            return 400, _dumps(_validation_error("the request body is not valid JSON")), b"application/json"
        record["body"] = body
        failure = self._injected_failure(index)
        if failure is not None:
            return failure, _dumps({"error": {"message": "fake SGLang injected failure"}}), b"application/json"
        try:
            items, batched = _parse_generate(body, self.vocab_size, self.context_length)
        except _BadRequest as exc:
            error = _validation_error(exc.message) if exc.validation else {"error": {"message": exc.message}}
            return 400, _dumps(error), b"application/json"
        results = await self._run_items(items, receive)
        return self._encode(results if batched else results[0])

    def _injected_failure(self, index: int) -> int | None:
        if self.fail_after is not None:
            return (self.fail_status or 500) if index >= self.fail_after else None
        return self.fail_status

    async def _run_items(self, items: list[_Item], receive: ASGIReceive) -> list[dict[str, Any]]:
        """Match the prefix cache, wait (abortable), then compute and cache each prompt like one SGLang batch."""
        started = time.monotonic()
        outcomes = [_Outcome(cached=self.cache.match(item.ids)) for item in items]
        call = _Call(rids=[item.rid for item in items])
        for rid in call.rids:
            self._by_rid[rid] = call
        self.waiting_calls += 1
        try:
            if self.delay > 0:
                await self._wait(call, receive, self.delay)
        finally:
            self.waiting_calls -= 1
            for rid in call.rids:
                if self._by_rid.get(rid) is call:
                    del self._by_rid[rid]
        for item, outcome in zip(items, outcomes, strict=True):
            outcome.aborted = item.rid in call.aborted
        return [self._result(item, outcome, started) for item, outcome in zip(items, outcomes, strict=True)]

    async def _wait(self, call: _Call, receive: ASGIReceive, delay: float) -> None:
        """Sleep ``delay`` unless every rid is aborted first; a client disconnect aborts every item too, as in
        SGLang, but at once: SGLang notices at its next check, within ``SGLANG_REQUEST_STATE_WAIT_TIMEOUT``
        seconds (4 by default)."""
        watcher = asyncio.create_task(self._watch_disconnect(call, receive))
        try:
            async with asyncio.timeout(delay):
                await call.done.wait()
        except TimeoutError:
            pass
        finally:
            watcher.cancel()

    async def _watch_disconnect(self, call: _Call, receive: ASGIReceive) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                with self._lock:
                    self.disconnected.extend(call.rids)
                for rid in call.rids:
                    call.abort(rid)
                return

    def _result(self, item: _Item, outcome: _Outcome, started: float) -> dict[str, Any]:
        if outcome.aborted:
            return _abort_result(item, started, self.report_cached_tokens)
        self.cache.insert(item.ids)
        cached = min(outcome.cached, len(item.ids) - 1)
        return self._completion(item, cached, started)

    def _completion(self, item: _Item, cached: int, started: float) -> dict[str, Any]:
        fn, clamped = self.logprob_fn, frozenset(self.clamp_token_ids)
        score = _Scorer(item.ids, fn, clamped)
        max_new = item.sampling.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
        out_ids = [] if max_new == 0 else [_choose_output(item, score, self.vocab_size)]
        finish: dict[str, Any] = ({"type": "length", "length": len(out_ids)} if max_new in (0, 1)
                                  else {"type": "stop", "matched": out_ids[0]})
        meta: dict[str, Any] = {"id": item.rid, "finish_reason": finish, "prompt_tokens": len(item.ids),
                                "weight_version": "default", "completion_tokens": len(out_ids)}
        if self.report_cached_tokens:
            meta["cached_tokens"] = cached
        meta["e2e_latency"] = time.monotonic() - started
        if item.return_logprob:
            meta.update(self._logprob_meta(item, out_ids, score, fn, clamped))
        return {"text": "".join(map(fake_token_text, out_ids)), "output_ids": out_ids, "meta_info": meta}

    def _logprob_meta(self, item: _Item, out_ids: list[int], score: _Scorer, fn: LogprobFn | None,
                      clamped: frozenset[int]) -> dict[str, Any]:
        text = item.text_in_logprobs
        out_lps = [score(t) for t in out_ids]
        if item.label_ids is None:
            ids_logprobs: list[Any] = [None] * len(out_ids)
        else:
            order = _shuffled(item.label_ids, score.seed() ^ len(item.label_ids))
            ids_logprobs = [[_entry(score(t), t, text) for t in order] for _ in out_ids]
        top: list[Any] = [[] for _ in out_ids]
        if item.top_logprobs_num and out_ids:
            top = [_top_entries(item, out_ids[0], out_lps[0], score, self.vocab_size)]
        started = item.logprob_start_len >= 0
        return {
            "input_token_logprobs": _input_logprobs(item, fn, clamped) if started else [],
            "output_token_logprobs": [_entry(lp, t, text) for lp, t in zip(out_lps, out_ids, strict=True)],
            "input_top_logprobs": [None] * (len(item.ids) - item.logprob_start_len) if started else [],
            "output_top_logprobs": top,
            "input_token_ids_logprobs": [None] * (len(item.ids) - item.logprob_start_len) if started else [],
            "output_token_ids_logprobs": ids_logprobs,
        }

    def _encode(self, result: dict[str, Any] | list[dict[str, Any]]) -> tuple[int, bytes, bytes]:
        """Serialize an answer, damaged on purpose when ``malformed`` asks for it."""
        if self.malformed == "not_json":
            return 200, b"<html><body>502 Bad Gateway</body></html>", b"text/html"
        if self.malformed == "reversed_batch" and isinstance(result, list):
            result.reverse()
        elif self.malformed is not None:
            for item in result if isinstance(result, list) else [result]:
                _damage(item, self.malformed)
        return 200, _dumps(result), b"application/json"


def _damage(item: dict[str, Any], mode: Malformed) -> None:
    meta = item["meta_info"]
    if mode == "missing_meta":
        del item["meta_info"]
    elif mode == "duplicate_logprob":
        for position in meta.get("output_token_ids_logprobs") or []:
            position.append(list(position[0]))
    elif mode == "missing_logprobs":
        meta.pop("output_token_ids_logprobs", None)


# --------------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------------


async def _cancel_other_tasks() -> None:
    """Leave nothing pending on the loop before it closes (no 'Task was destroyed' noise)."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop  # pragma: no cover - depends on the environment


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket asyncio will give TCP_NODELAY connections (it checks proto == IPPROTO_TCP).

    With proto 0, Nagle plus delayed ACKs add ~40 ms to every answer sent as headers then body.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(4096)
    sock.setblocking(False)
    return sock


def _auth_exempt(path: str) -> bool:
    """SGLang's api-key middleware lets health and metrics probes through without a key."""
    return path.startswith(("/health", "/metrics"))


def _authorized(scope: dict[str, Any], api_key: str) -> bool:
    expected = b"Bearer " + api_key.encode()
    return any(name == b"authorization" and value == expected for name, value in scope["headers"])


def _validation_error(message: str) -> dict[str, Any]:
    """The body SGLang's RequestValidationError handler sends (FastAPI's 422 rewritten to 400)."""
    return {"object": "error", "message": message, "type": "Bad Request", "param": None, "code": 400}


async def _read_body(receive: ASGIReceive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _respond(send: ASGISend, status: int, payload: Any) -> None:
    await _respond_raw(send, status, _dumps(payload), b"application/json")


async def _respond_raw(send: ASGISend, status: int, body: bytes, content_type: bytes) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _parse_args(argv: Iterable[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Fake SGLang server for tests and benchmarks.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds to wait before answering /generate")
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--vocab-size", type=int, default=DEFAULT_VOCAB_SIZE)
    parser.add_argument("--context-length", type=int, default=32768)
    parser.add_argument("--model-path", default="fake/Qwen3-0.6B")
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument("--no-cached-tokens", action="store_true", help="omit meta_info.cached_tokens")
    return parser.parse_args(list(argv) if argv is not None else None)


def main(argv: Iterable[str] | None = None) -> None:
    """Serve until SIGINT/SIGTERM; prints the URL once it accepts connections."""
    args = _parse_args(argv)
    server = FakeSGLang(host=args.host, port=args.port, delay=args.delay, api_key=args.api_key, keep_records=False,
                        vocab_size=args.vocab_size, context_length=args.context_length, model_path=args.model_path,
                        served_model_name=args.served_model_name)
    server.report_cached_tokens = not args.no_cached_tokens
    stopping = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    with server:
        print(f"fake SGLang serving at {server.url}", flush=True)
        stopping.wait()


if __name__ == "__main__":
    main()

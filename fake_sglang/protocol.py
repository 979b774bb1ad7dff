"""What SGLang 0.5.23's `/generate` accepts, checked as strictly as SGLang does (stricter where a typo in
our client would otherwise go unnoticed): a body becomes its items, or a `BadRequest` with SGLang's message."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from fake_sglang.images import VisionTokens, images_per_item, placeholders_expand
from fake_sglang.protocol_errors import BadRequest
from fake_sglang.text import TextTokenizer

DEFAULT_VOCAB_SIZE = 151936
DEFAULT_MAX_NEW_TOKENS = 128  # SamplingParams' default in SGLang

# GenerateReqInput fields a client may legitimately send. SGLang itself ignores unknown top-level keys
# (FastAPI/pydantic dataclass); the fake rejects them so a typo in our client cannot go unnoticed.
# `model` is no GenerateReqInput field, but the SGLang gateway (smg) adds it to every body it forwards
# and SGLang ignores it, so it passes here too.
_TOP_LEVEL_KEYS = frozenset(
    {
        "model",
        "text",
        "input_ids",
        "sampling_params",
        "rid",
        "return_logprob",
        "logprob_start_len",
        "top_logprobs_num",
        "token_ids_logprob",
        "return_text_in_logprobs",
        "stream",
        "log_metrics",
        "return_hidden_states",
        "lora_path",
        "lora_id",
        "session_params",
        "custom_logit_processor",
        "bootstrap_host",
        "bootstrap_port",
        "bootstrap_room",
        "bootstrap_pair_key",
        "data_parallel_rank",
        "priority",
        "no_logs",
        "extra_key",
        "custom_labels",
        "return_bytes",
        "return_entropy",
        "routed_dp_rank",
        "conversation_id",
        "background",
        "image_data",
    }
)
# Accepted by SGLang but meaningless for a text-free fake; rejected so nobody believes they work here.
_UNSUPPORTED_KEYS = ("input_embeds", "video_data", "audio_data", "modalities")
# SGLang's SamplingParams constructor arguments: anything else raises before the request is scheduled.
_SAMPLING_KEYS = frozenset(
    {
        "max_new_tokens",
        "stop",
        "stop_token_ids",
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "frequency_penalty",
        "presence_penalty",
        "repetition_penalty",
        "min_new_tokens",
        "n",
        "json_schema",
        "regex",
        "ebnf",
        "structural_tag",
        "ignore_eos",
        "skip_special_tokens",
        "spaces_between_special_tokens",
        "no_stop_trim",
        "custom_params",
        "stream_interval",
        "logit_bias",
        "sampling_seed",
    }
)


@dataclass(slots=True)
class Item:
    """One prompt of a /generate call (a batched call has several)."""

    ids: list[int]
    sampling: dict[str, Any]
    return_logprob: bool
    logprob_start_len: int
    top_logprobs_num: int
    label_ids: list[int] | None
    rid: str
    text_in_logprobs: bool
    images: list[str]
    """The item's images; its `ids` are then expanded (`fake_sglang.images`)."""


def _is_int(value: Any) -> bool:
    return type(value) is int


def _check_ids(ids: Any, what: str, vocab_size: int, *, allow_empty: bool = False) -> list[int]:
    if not isinstance(ids, list) or not set(map(type, ids)) <= {int}:  # C-speed check; rejects bools and floats
        raise BadRequest(f"{what} must be a list of integers", validation=True)
    if not ids and not allow_empty:
        raise BadRequest(f"{what} is empty")
    if ids and (min(ids) < 0 or max(ids) >= vocab_size):
        bad = next(t for t in ids if t < 0 or t >= vocab_size)
        raise BadRequest(f"Token id {bad} in {what} is out of vocabulary (vocab size {vocab_size}).")
    return ids


def _number(sp: dict[str, Any], key: str, default: float) -> float:
    value = sp.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRequest(f"{key} must be a number, got {value!r}.")
    return float(value)


def _check_sampling(sp: Any) -> dict[str, Any]:
    """SamplingParams(**sp) then .verify(), as SGLang's tokenizer manager does before scheduling."""
    if sp is None:
        return {}
    if not isinstance(sp, dict):
        raise BadRequest("sampling_params must be an object", validation=True)
    unknown = sorted(set(sp) - _SAMPLING_KEYS)
    if unknown:
        raise BadRequest(f"SamplingParams.__init__() got an unexpected keyword argument '{unknown[0]}'")
    _check_sampling_ranges(sp)
    return sp


def _check_sampling_ranges(sp: dict[str, Any]) -> None:
    max_new = sp.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
    if max_new is not None and (not _is_int(max_new) or max_new < 0):
        raise BadRequest(f"max_new_tokens must be at least 0, got {max_new}.")
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
            raise BadRequest(message)


def _per_item(
    body: dict[str, Any], key: str, size: int, default: Any, *, batched: bool, nested: bool = False
) -> list[Any]:
    """Broadcast a scalar (or, for ``nested`` keys, a flat list) to every batch item; check list lengths."""
    value = body.get(key, default)
    nested_ok = not nested or (bool(value) and all(isinstance(v, list) for v in value))
    per_item = batched and isinstance(value, list) and nested_ok
    if not per_item:
        return [value] * size
    if len(value) != size:
        raise BadRequest(f"The length of {key} ({len(value)}) does not match the batch size ({size}).")
    return list(value)


def _check_top_level(body: Any) -> None:
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object", validation=True)
    unknown = sorted(set(body) - _TOP_LEVEL_KEYS - set(_UNSUPPORTED_KEYS))
    if unknown:
        raise BadRequest(f"unknown GenerateReqInput field(s): {', '.join(unknown)}", validation=True)
    for key in _UNSUPPORTED_KEYS:
        if body.get(key) is not None:
            raise BadRequest(f"the fake does not support {key}")
    if body.get("stream"):
        raise BadRequest("the fake does not stream; send stream=false")
    if body.get("text") is None and body.get("input_ids") is None:
        raise BadRequest("Either text, input_ids or input_embeds should be provided.")
    if body.get("text") is not None and body.get("input_ids") is not None:  # SGLang would use input_ids alone
        raise BadRequest("the fake takes text or input_ids, not both")


def _prompts(body: dict[str, Any], tokenizer: TextTokenizer | None) -> tuple[list[Any], bool, str]:
    """The body's prompts as id lists (text tokenized, as SGLang's TokenizerManager does), whether the body is
    a batch, and the field they came from (for error messages)."""
    input_ids = body.get("input_ids")
    if input_ids is not None:
        batched = isinstance(input_ids, list) and bool(input_ids) and isinstance(input_ids[0], list)
        return (input_ids if batched else [input_ids]), batched, "input_ids"
    if tokenizer is None:
        raise BadRequest(
            "The engine initialized with skip_tokenizer_init=True cannot accept text prompts. "
            "Please provide input_ids (this fake was given no tokenizer)."
        )
    text = body["text"]
    batched = isinstance(text, list)
    texts = text if batched else [text]
    if not texts or not all(isinstance(one, str) for one in texts):
        raise BadRequest("text must be a string or a non-empty list of strings", validation=True)
    return tokenizer(texts), batched, "text"


def generate_parse(
    body: Any,
    vocab_size: int,
    context_length: int,
    vision: VisionTokens | None = None,
    image_tokens: int = 64,
    tokenizer: TextTokenizer | None = None,
) -> tuple[list[Item], bool]:
    """Validate a /generate body; return its items (text tokenized by `tokenizer`, placeholders expanded for
    their images, when the server sees: `vision`) and whether the answer must be a list."""
    _check_top_level(body)
    prompts, batched, field = _prompts(body, tokenizer)
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
    images = images_per_item(body.get("image_data"), size, batched=batched)
    if vision is None and any(images):
        raise BadRequest("image_data was given, but the model is not multimodal (or runs --language-only).")
    items = []
    for i, prompt in enumerate(prompts):
        what = f"{field}[{i}]" if batched else field
        ids = _check_ids(prompt, what, vocab_size)
        if vision is not None and images[i]:
            ids = placeholders_expand(ids, images[i], vision, image_tokens)
        item = Item(
            ids=ids,
            images=images[i],
            sampling=_check_sampling(columns["sampling"][i]),
            return_logprob=_check_flag(columns["return_logprob"][i], "return_logprob"),
            logprob_start_len=_check_start(columns["start"][i], len(ids)),
            top_logprobs_num=_check_top(columns["top"][i]),
            label_ids=_check_labels(columns["labels"][i], vocab_size),
            rid=rids[i],
            text_in_logprobs=text_in_logprobs,
        )
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
            raise BadRequest("The rid should be a string.")
        return [rid]
    if isinstance(rid, str):
        return [f"{rid}_{i}" for i in range(size)]
    if not isinstance(rid, list) or not all(isinstance(r, str) for r in rid):
        raise BadRequest("The rid should be a string or a list of strings.")
    if len(rid) != size:
        raise BadRequest("The specified rids length mismatch with the batch_size for batch processing.")
    if len(set(rid)) != len(rid):
        duplicates = sorted({r for r in rid if rid.count(r) > 1})
        raise BadRequest(f"Duplicate request IDs detected within the request: {duplicates}")
    return list(rid)


def _check_flag(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise BadRequest(f"{key} must be a boolean", validation=True)
    return value


def _check_start(value: Any, prompt_len: int) -> int:
    if not _is_int(value) or value < -1:
        raise BadRequest(f"logprob_start_len must be -1 or a non-negative integer, got {value!r}")
    if value >= prompt_len:
        raise BadRequest(f"logprob_start_len ({value}) is superior or equal to the input length ({prompt_len}).")
    return int(value)


def _check_top(value: Any) -> int:
    if not _is_int(value) or value < 0:
        raise BadRequest(f"top_logprobs_num must be a non-negative integer, got {value!r}")
    return int(value)


def _check_labels(value: Any, vocab_size: int) -> list[int] | None:
    if value is None:
        return None
    return _check_ids(value, "token_ids_logprob", vocab_size, allow_empty=True)


def _check_context(item: Item, context_length: int) -> None:
    n = len(item.ids)
    if n >= context_length:
        raise BadRequest(f"The input ({n} tokens) is longer than the model's context length ({context_length} tokens).")
    max_new = item.sampling.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS) or 0
    if n + max_new >= context_length:
        raise BadRequest(
            f"Requested token count exceeds the model's maximum context length of {context_length} "
            f"tokens. You requested a total of {n + max_new} tokens: {n} tokens from the input "
            f"messages and {max_new} tokens for the completion."
        )


def validation_error(message: str) -> dict[str, Any]:
    """The body SGLang's RequestValidationError handler sends (FastAPI's 422 rewritten to 400)."""
    return {"object": "error", "message": message, "type": "Bad Request", "param": None, "code": 400}

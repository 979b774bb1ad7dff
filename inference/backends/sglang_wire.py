"""SGLang's `/generate` wire format as this client speaks it: request bodies written as text (a prefix and
its images serialised once, on the shared `Prefix`) and results read strictly. Kept apart from the client
(`inference/backends/sglang.py`), which owns the connection pool, retries and failure classification.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

import orjson

from inference.backends.base import BranchCall, Generation
from inference.errors import BackendFailed

SAMPLING = {"max_new_tokens": 1, "temperature": 0.0}


def response_json_read(content: bytes) -> Any:
    """orjson first: decoding a 64-item batch with the standard library was about 6 % of the server's
    CPU on the 64-question request. orjson refuses the `-Infinity` and `NaN` constants that Python's
    json writes, so such a body is read by the standard library, as before."""
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return json.loads(content)


def call_ids_text(*, call: BranchCall) -> str:
    """A branch's whole prompt as the items of a JSON list: its prefix's text, derived once on the shared
    `Prefix`, then its suffix's."""
    prefix, suffix = call.prefix.ids_text, suffix_text(tuple(call.suffix))
    return f"{prefix},{suffix}" if prefix and suffix else prefix or suffix


def call_images_json(*, call: BranchCall) -> str | None:
    """A call's `image_data` as a compact JSON list: its prefix's images (serialised once, on the shared `Prefix`),
    then its suffix's own (a question's, serialised once per question); None for a call without images."""
    prefix = call.prefix.images_json
    if call.images is None:
        return prefix
    own = call.images.json_items
    return f"{prefix[:-1]},{own}]" if prefix else f"[{own}]"


@functools.lru_cache(maxsize=8192)
def suffix_text(ids: tuple[int, ...]) -> str:
    """A suffix's ids as JSON list items, cached: suffixes are question blocks, which callers ask again and
    again (writing 64 of them was 6 % of the server's CPU on the 64-question request)."""
    return ",".join(map(str, ids))


def request_body(
    *, rid: str, ids_json: str, label_ids: Sequence[int], images_json: str | None = None, priority: int | None = None
) -> str:
    """The /generate body as text; `ids_json` and `images_json` are already serialised (`Prefix`); SGLang's
    `priority` when there is one (`inference.priority`)."""
    rest = orjson.dumps(
        {
            "sampling_params": SAMPLING,
            "return_logprob": True,
            "token_ids_logprob": list(label_ids),
            "logprob_start_len": -1,
            "rid": rid,
            **({} if priority is None else {"priority": priority}),
        }
    ).decode()
    images = f'"image_data":{images_json},' if images_json else ""
    return f'{{"input_ids":{ids_json},{images}{rest[1:]}'


def generation_parse(item: Any, *, label_ids: Sequence[int], rid: str) -> Generation:
    """Strict reading of one result: its own rid, every requested label id exactly once (a batch
    item's entries are the union of the batch's labels), finite or -inf values."""
    meta = item.get("meta_info") if isinstance(item, dict) else None
    if not isinstance(meta, dict):
        raise BackendFailed("SGLang result has no meta_info")
    if meta.get("id", rid) != rid:
        raise BackendFailed(f"SGLang answered {meta.get('id')!r} where {rid!r} was expected")
    finish = meta.get("finish_reason")
    if isinstance(finish, dict) and finish.get("type") == "abort":
        raise BackendFailed(f"SGLang aborted the request: {finish.get('message', '')}")
    prompt_tokens = meta.get("prompt_tokens")
    cached = meta.get("cached_tokens")
    if not isinstance(prompt_tokens, int) or (cached is not None and not isinstance(cached, int)):
        raise BackendFailed("SGLang result has no integer prompt_tokens/cached_tokens")
    if not label_ids:
        return Generation(prompt_tokens=prompt_tokens, cached_tokens=cached)
    positions = meta.get("output_token_ids_logprobs")
    if not isinstance(positions, list) or not positions or not isinstance(positions[0], list):
        raise BackendFailed("SGLang result has no output_token_ids_logprobs for the first position")
    found = _logprobs_read(positions[0])
    try:
        label_logprobs = tuple([found[t] for t in label_ids])
    except KeyError:
        missing = [t for t in label_ids if t not in found]
        raise BackendFailed(f"SGLang returned no log-prob for label token(s) {missing[:5]}") from None
    return Generation(prompt_tokens=prompt_tokens, cached_tokens=cached, label_logprobs=label_logprobs)


_NUMBERS = (float, int)


def _logprobs_read(entries: Any) -> dict[int, float]:
    """`[logprob, token id, ...]` entries as token id -> log-prob; each id at most once. Exact type tests
    (JSON gives lists, ints and floats) keep a 64-item batch's few hundred entries cheap; anything
    else is looked at again by `_entry_valid` for its verdict and message."""
    found: dict[int, float] = {}
    for entry in entries:
        exact = type(entry) is list and len(entry) >= 2 and type(entry[1]) is int and type(entry[0]) in _NUMBERS
        if not exact and not _entry_valid(entry):
            raise BackendFailed(f"malformed log-prob entry {entry!r}")
        if entry[1] in found:
            raise BackendFailed(f"SGLang returned label token {entry[1]} twice")
        found[entry[1]] = float(entry[0])
    return found


def _entry_valid(entry: Any) -> bool:
    return (
        isinstance(entry, list | tuple)
        and len(entry) >= 2
        and isinstance(entry[1], int)
        and isinstance(entry[0], int | float)
    )

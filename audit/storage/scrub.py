"""What storage never holds, whatever a client sent: image bytes (a `data:` URL keeps its header and
size), NUL characters and lone UTF-16 surrogates (which PostgreSQL and UTF-8 refuse)."""

from __future__ import annotations

import re
from typing import Any

import orjson

_STORED_DATA_URL = re.compile(r"\b(data:[^,\s\"]*,)([A-Za-z0-9+/=%._~-]*)")
_SURROGATE = re.compile("[\ud800-\udfff]")


def image_bytes_redact(value: Any) -> Any:
    """`value` (JSON as sent) without image bytes: each `data:` URL keeps its header and size only, so
    storage never holds an image at any level. JSON with no `data:` anywhere (most requests) is returned
    as it is after one scan of its encoding, not walked node by node."""
    try:
        if b"data:" not in orjson.dumps(value):
            return value
    except (orjson.JSONEncodeError, TypeError):  # what orjson cannot encode (a lone surrogate) is walked
        pass
    return _redacted(value)


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        if "data:" not in value:
            return value
        return _STORED_DATA_URL.sub(lambda m: f"{m.group(1)}[{len(m.group(2))} characters not stored]", value)
    if isinstance(value, dict):
        return {key: _redacted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_redacted(item) for item in value]
    return value


def text_storable(text: str) -> str:
    """`text` with NUL characters and lone surrogates as U+FFFD: text every database can store."""
    return _SURROGATE.sub("\ufffd", text.replace("\x00", "\ufffd"))

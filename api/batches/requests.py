"""What the Files and Batches routes take from a client, checked before anything is stored: a batch's creation
body, an upload's purpose, a list's cursor. Each check is linear in what was sent and quotes no value at length."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from api.batches.lines import endpoint_format
from api.plumbing.api_error import ApiError
from api.plumbing.ratelimits import limits_for
from audit.callers import Caller
from batches.lifecycle import WINDOWS
from inference.errors import value_quoted

BATCH_ENDPOINTS = ("/v1/decisions", "/v1/systemone", "/v1/classify")
"""Routes a batch's lines may name (those installed): every evaluating route of the service."""
PURPOSES = ("batch",)
"""Upload purposes this service takes: a batch input file, the only file its routes read."""
METADATA_PAIRS, METADATA_KEY, METADATA_VALUE = 16, 64, 512
"""OpenAI's bounds on a batch's metadata: 16 pairs, keys of 64 characters, values of 512."""
LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX = 20, 100


@dataclass(frozen=True)
class BatchAsked:
    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: dict[str, str] | None


def object_not_found(what: str, ident: str) -> ApiError:
    """OpenAI's 404 for an id of no object of the caller's (another key's is not found either: ids leak nothing)."""
    return ApiError(404, "not_found", f"No such {what} object: {ident[:64]}", param="id")


def _invalid(message: str, *, param: str) -> ApiError:
    return ApiError(400, "invalid_request", message, param=param)


def batch_asked(*, data: Any) -> BatchAsked:
    """The creation body, or a 400 naming its first fault (OpenAI's SDK sends each field at most once)."""
    if not isinstance(data, dict):
        raise _invalid("the body must be a JSON object", param="body")
    file_id = data.get("input_file_id")
    if not isinstance(file_id, str) or not file_id:
        raise _invalid("input_file_id must be the id of an uploaded file (purpose batch)", param="input_file_id")
    endpoint = data.get("endpoint")
    if endpoint not in BATCH_ENDPOINTS or endpoint_format(endpoint=endpoint) is None:
        installed = [e for e in BATCH_ENDPOINTS if endpoint_format(endpoint=e) is not None]
        raise _invalid(
            f"endpoint {value_quoted(str(endpoint))} is not one a batch runs: one of {', '.join(installed)}",
            param="endpoint",
        )
    window = data.get("completion_window", "24h")
    if not isinstance(window, str) or window not in WINDOWS:
        raise _invalid(
            f"completion_window {value_quoted(str(window))} is not offered: {', '.join(WINDOWS)}",
            param="completion_window",
        )
    return BatchAsked(
        input_file_id=file_id,
        endpoint=endpoint,
        completion_window=window,
        metadata=metadata_checked(value=data.get("metadata")),
    )


def metadata_checked(*, value: Any) -> dict[str, str] | None:
    """OpenAI's metadata: at most 16 string pairs, bounded keys and values."""
    if value is None:
        return None
    if not isinstance(value, dict) or len(value) > METADATA_PAIRS:
        raise _invalid(f"metadata must be an object of at most {METADATA_PAIRS} pairs", param="metadata")
    for key, item in value.items():
        if len(key) > METADATA_KEY or not isinstance(item, str) or len(item) > METADATA_VALUE:
            raise _invalid(
                f"metadata keys are strings of at most {METADATA_KEY} characters and values strings of at most "
                f"{METADATA_VALUE}",
                param="metadata",
            )
    return value


def purpose_checked(*, value: str | None) -> str:
    if value not in PURPOSES:
        raise _invalid(
            f"purpose {value_quoted(str(value))} is not one this service takes: {', '.join(PURPOSES)}",
            param="purpose",
        )
    return value


@dataclass(frozen=True)
class Page:
    after: str | None
    limit: int


def page_asked(*, query: Any) -> Page:
    """A list's cursor (`after`, an id from the previous page) and size (`limit`, 1 to 100)."""
    raw = query.get("limit", str(LIST_LIMIT_DEFAULT))
    digits = raw.isascii() and raw.isdigit() and len(raw) <= len(str(LIST_LIMIT_MAX))  # int() of any other fails
    if not digits or not 1 <= int(raw) <= LIST_LIMIT_MAX:
        raise _invalid(f"limit must be an integer from 1 to {LIST_LIMIT_MAX}", param="limit")
    after = query.get("after")
    return Page(after=after[:64] if after else None, limit=int(raw))


def batch_admitted(*, caller: Caller | None, lines: int) -> None:
    """Refuse at creation (429, not retried) a batch its key could never run within its window: more lines than
    the key's requests per minute allow in 24 hours (a paused key is refused as on every route, before this).
    Tokens are held to the key's limit as the lines run (each waits for its budget), since a line's tokens are
    known only once it is tokenized."""
    per_minute = limits_for(caller=caller).requests_per_minute
    window_minutes = int(WINDOWS["24h"].total_seconds() // 60)
    if per_minute is None or lines <= per_minute * window_minutes:
        return
    raise ApiError(
        429,
        "rate_limited",
        f"the batch has {lines} lines; this key's {per_minute} requests per minute run at most "
        f"{per_minute * window_minutes} within the completion window",
        {"x-should-retry": "false"},
    )

"""What an SGLang call that went wrong means: the backend unavailable (503 with Retry-After, worth retrying) or
the call failed, told apart by how the call ended, the status, and the gateway's error code.
"""

from __future__ import annotations

import json

import aiohttp

from inference.errors import BackendFailed, BackendUnavailable
from inference.redaction import backend_text_redact

# Gateway error codes that mean no worker could take the request (no worker registered or healthy for
# the model, or the chosen worker refused the connection): the backend is unavailable, not broken.
GATEWAY_UNAVAILABLE_CODES = frozenset({"model_not_found", "no_models_available", "call_upstream_connection_failed"})


def call_failure_classify(*, url: str, error: aiohttp.ClientError) -> BackendUnavailable | BackendFailed:
    """A call that got no answer: a connection that could not be made, or that the backend closed before it
    answered, means the backend is unavailable (503, retryable); a read that timed out, or a broken answer,
    that the call failed."""
    if isinstance(error, aiohttp.ServerTimeoutError) and not isinstance(error, aiohttp.ConnectionTimeoutError):
        return BackendFailed(f"SGLang at {url} did not answer in time: {error!r}")
    if isinstance(error, aiohttp.ClientConnectionError):  # refused, reset, or not made in time
        return BackendUnavailable(f"SGLang at {url} is unreachable: {error!r}")
    return BackendFailed(f"SGLang call failed: {error!r}")


def failure_classify(*, status: int, text: str) -> BackendUnavailable | BackendFailed:
    """A non-200 answer as the error it means. 503, and the gateway's answers for "no worker can take
    this" (404 `model_not_found` with zero workers, 500 `call_upstream_connection_failed` when every
    worker is down), are BackendUnavailable (503 with Retry-After); anything else is BackendFailed."""
    detail = backend_text_redact(text=text)[:300]  # redact first: a cut could split a URL's credentials
    if status == 503 or _gateway_error_code(text=text) in GATEWAY_UNAVAILABLE_CODES:
        return BackendUnavailable(f"SGLang is not ready ({status}): {detail}")
    return BackendFailed(f"SGLang answered {status}: {detail}")


def _gateway_error_code(*, text: str) -> str | None:
    """`error.code` of the gateway's OpenAI-style error body, when the text is one."""
    try:
        body = json.loads(text)
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None

"""OpenAI's error shape, on every answer of `POST /v1/decisions` that is not a 200.

`{"error": {"message", "type", "param", "code"}}`, as the official SDK reads it (`openai/_exceptions.py`): an
invalid request is a 400 (OpenAI's API has no 422), and `x-should-retry` tells the SDK which failures to retry
before its own rule does (it retries 408, 409, 429 and every 5xx).
"""

from __future__ import annotations

from typing import Any

from api.checking.json_body import BodyNotJson
from api.plumbing.api_error import ApiError
from api.plumbing.error_responses import RETRIED
from api.plumbing.formats import ErrorShape

TYPES = {401: "invalid_request_error", 403: "permission_error", 429: "rate_limit_error"}
"""OpenAI's error `type` by status where it is not `invalid_request_error` (4xx) or `server_error` (5xx)."""
CODES = {
    "authentication_error": "invalid_api_key",
    "validation_error": "invalid_value",
    "rate_limited": "rate_limit_exceeded",
}
"""Our error types as OpenAI's codes name them; any other type is its own code."""


class OpenAIShape(ErrorShape):
    def status(self, error: ApiError) -> int:
        return 400 if error.status == 422 else error.status

    def body(self, error: ApiError, *, message: str) -> dict[str, Any]:
        kind = TYPES.get(error.status, "server_error" if error.status >= 500 else "invalid_request_error")
        return {
            "error": {
                "message": message,
                "type": kind,
                "param": error.param,
                "code": CODES.get(error.error_type, error.error_type),
            }
        }

    def headers(self, error: ApiError, *, status: int) -> dict[str, str]:
        return {"x-should-retry": "true" if status in RETRIED else "false"}

    def json_invalid(self, exc: BodyNotJson) -> ApiError:
        return ApiError(400, "invalid_json", f"We could not parse the JSON body of your request: {exc}")


OPENAI_SHAPE = OpenAIShape()

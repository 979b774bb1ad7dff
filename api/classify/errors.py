"""The error shape of `POST /v1/classify`, whose clients were written for SGLang's and vLLM's classify API:
`{"error", "type", "code"}`, and a body that is not JSON is a 400, as they answer it."""

from __future__ import annotations

from typing import Any

from api.checking.json_body import BodyNotJson
from api.plumbing.api_error import ApiError
from api.plumbing.formats import ErrorShape


class ClassifyShape(ErrorShape):
    def body(self, error: ApiError, *, message: str) -> dict[str, Any]:
        return {"error": message, "type": error.error_type, "code": error.status}

    def json_invalid(self, exc: BodyNotJson) -> ApiError:
        return ApiError(400, "invalid_request", str(exc))


CLASSIFY_SHAPE = ClassifyShape()

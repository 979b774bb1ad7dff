"""Requests and checks shared by the `POST /v1/decisions` tests."""

from __future__ import annotations

from typing import Any

import httpx
from openai.types import Decision

from api.decisions.openapi_examples import DECISIONS_REQUEST

PATH = "/v1/decisions"


def decision_with(**changes: Any) -> dict[str, Any]:
    """The README's questions through this route, with some fields replaced."""
    return {**DECISIONS_REQUEST, **changes}


def question_with(kind: str = "predicate", **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"type": kind, "instructions": "Is the customer asking for money back?"}
    if kind == "choice":
        base["choices"] = [{"value": "yes"}, {"value": "no"}]
    if kind == "score":
        base["levels"] = [{"label": "Calm"}, {"label": "Angry"}]
    return {**base, **fields}


def decision_of(response: httpx.Response) -> Decision:
    """The 200 body as the official SDK's own model reads it (strict: a value's JSON type is checked)."""
    assert response.status_code == 200, response.text
    return Decision.model_validate(response.json(), strict=True)


def assert_openai_error(
    response: httpx.Response, status: int, *, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """An error in OpenAI's shape, with the request id under both names."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and isinstance(error["message"], str)
    assert error["type"] == ("server_error" if status >= 500 else "invalid_request_error")
    assert response.headers["x-request-id"] == response.headers["x-typesafe-request-id"]
    if code is not None:
        assert error["code"] == code, error
    if param is not None:
        assert error["param"] == param, error
    return dict(error)

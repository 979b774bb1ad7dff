"""The examples of `POST /v1/decisions`'s document: two requests, each of which evaluates
(`tests/docs/test_response_contract.py` sends them, as the tests and benchmarks of this route do), the answers the
first gets, and an error of each kind.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample

from api.decisions.errors import OPENAI_SHAPE
from api.plumbing.api_error import ApiError
from api.plumbing.error_responses import error_body

DECISIONS_REQUEST: dict[str, Any] = {
    "model": "jev-latest",
    "input": "Hi, I was charged twice for my March invoice and the refund still hasn't arrived. Fix it today!",
    "questions": [
        {"type": "predicate", "name": "refund", "instructions": "Is the customer asking for money back?"},
        {
            "type": "choice",
            "name": "team",
            "instructions": "Which team should handle this ticket?",
            "choices": [
                {"value": "Billing", "description": "Payments, invoices, refunds"},
                {"value": "Technical", "description": "Bugs, outages"},
                {"value": "Sales", "description": "Pricing, upgrades"},
            ],
        },
        {
            "type": "score",
            "name": "anger",
            "instructions": "How frustrated is the customer?",
            "levels": [{"label": "Calm"}, {"label": "Frustrated"}, {"label": "Very angry"}],
        },
    ],
}
"""The README example, asked through this route: the same questions, so the same answers."""

DECISIONS_CHAT_REQUEST: dict[str, Any] = {
    "model": "jev-latest",
    "input": [
        {"type": "message", "role": "developer", "content": "You are the support assistant of Acme Cloud."},
        {"type": "message", "role": "user", "content": "Is my deploy in eu-west-1 failing because of you?"},
        {"type": "function_call", "call_id": "call_1", "name": "status_lookup", "arguments": '{"region":"eu-west-1"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": '{"status":"degraded"}'},
    ],
    "questions": [
        {"type": "predicate", "name": "outage", "instructions": "Does the tool output show a service problem?"},
        {
            "type": "choice",
            "instructions": [{"type": "input_text", "text": "Is the user technical?"}],
            "choices": [{"value": True}, {"value": False}],
        },
    ],
}

DECISIONS_RESPONSE: dict[str, Any] = {
    "answers": [
        {"type": "predicate", "name": "refund", "probability": 0.88},
        {
            "type": "choice",
            "name": "team",
            "choice": "Billing",
            "confidence": 0.43,
            "probabilities": [
                {"value": "Billing", "probability": 0.8},
                {"value": "Technical", "probability": 0.13},
                {"value": "Sales", "probability": 0.07},
            ],
        },
        {
            "type": "score",
            "name": "anger",
            "score": 1.26,
            "confidence": 0.12,
            "probabilities": [
                {"value": 0, "label": "Calm", "probability": 0.12},
                {"value": 1, "label": "Frustrated", "probability": 0.5},
                {"value": 2, "label": "Very angry", "probability": 0.38},
            ],
        },
    ],
    "model": "jev-latest",
    "usage": {
        "input_tokens": 402,
        "input_tokens_details": {"cached_tokens": 288, "cache_write_tokens": 0},
        "output_tokens": 4,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 406,
    },
}

DECISIONS_EXAMPLES = [
    OpenApiExample("ticket", value=DECISIONS_REQUEST, request_only=True, summary="The README's three questions"),
    OpenApiExample(
        "tool_calls",
        value=DECISIONS_CHAT_REQUEST,
        request_only=True,
        summary="Messages, a function call and its output; boolean choices",
    ),
    OpenApiExample("answers", value=DECISIONS_RESPONSE, response_only=True, status_codes=["200"]),
    *[
        OpenApiExample(
            f"error_{status}",
            value=error_body(ApiError(status, code, message, param=param), shape=OPENAI_SHAPE),
            response_only=True,
            status_codes=[str(status)],
        )
        for status, code, message, param in (
            (
                400,
                "array_below_min_length",
                "questions[1].choices: Between 2 and 255 choices are allowed on this server, got 1",
                "questions[1].choices",
            ),
            (401, "invalid_api_key", "missing API key: send Authorization: Bearer <key>", None),
            (
                404,
                "model_not_found",
                "The model 'gpt-6-luna' does not exist on this server; use jev-latest or Qwen/Qwen3.6-35B-A3B",
                "model",
            ),
            (429, "rate_limited", "rate limit reached for requests; retry in 12s", None),
        )
    ],
]

"""Named examples of `POST /v1/systemone`: every request here evaluates (`tests/docs/test_schema.py`)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample

from api.openapi.errors import SHARED_ERRORS, error_example

README_REQUEST: dict[str, Any] = {
    "model": "jev-latest",
    "state": "Hi, I was charged twice for my March invoice and the refund still hasn't arrived. Fix it today!",
    "questions": {
        "refund": {"type": "noul", "instructions": "Is the customer asking for money back?"},
        "team": {
            "type": "choice",
            "instructions": "Which team should handle this ticket?",
            "criteria": {
                "Billing": "Payments, invoices, refunds",
                "Technical": "Bugs, outages",
                "Sales": "Pricing, upgrades",
            },
        },
        "anger": {
            "type": "score",
            "instructions": "How frustrated is the customer?",
            "criteria": ["Calm", "Frustrated", "Very angry"],
        },
    },
}

CHAT_REQUEST: dict[str, Any] = {
    "model": "jev-latest",
    "state": [
        {"role": "system", "content": "You are the support assistant of Acme Cloud."},
        {"role": "user", "content": "My deploys have failed since this morning with error 503."},
        {"role": "assistant", "content": "Sorry about that! Which region are you deploying to?"},
        {"role": "user", "content": "eu-west-1. Third time this month, I'm looking at other providers."},
    ],
    "questions": {
        "churn_risk": {"type": "noul", "instructions": "Is the customer considering leaving?"},
        "topic": {
            "type": "choice",
            "instructions": "What is the conversation about?",
            "criteria": {
                "outage": "A service is down or failing",
                "billing": "Invoices, payments, refunds",
                "how_to": "A question about using the product",
            },
        },
        "resolved": {
            "type": "noul",
            "instructions": "Has the assistant already solved the problem?",
            "criteria": {"true": "Solved", "false": "Still open"},
        },
    },
}

SCORE_10_REQUEST: dict[str, Any] = {
    "model": "jev-latest",
    "state": "The pasta was cold and the waiter forgot our drinks, but the tiramisu was the best I have ever had.",
    "questions": {
        "rating": {
            "type": "score",
            "instructions": "Rate the overall experience this review describes.",
            "criteria": ["1 - terrible", "2", "3", "4", "5 - mixed", "6", "7", "8", "9", "10 - perfect"],
        },
    },
}

STRUCTURED_REQUEST: dict[str, Any] = {
    "model": "jev-latest",
    "state": {
        "order_id": "A-1042",
        "customer": {"name": "Lena", "tier": "gold", "orders": 14, "returns": 0},
        "items": [{"sku": "KB-01", "name": "Mechanical keyboard", "qty": 1, "price_eur": 129.0}],
        "message": "Arrived with two broken keys. I want a replacement, not my money back.",
    },
    "questions": {
        "wants": {
            "type": "choice",
            "instructions": "What does the customer want?",
            "criteria": {
                "replacement": "A new item sent in place of the broken one",
                "refund": "Their money back",
                "repair": None,
            },
        },
        "priority": {
            "type": "score",
            "instructions": {
                "task": "How urgently should support act?",
                "consider": ["customer tier", "order history"],
            },
            "criteria": ["low", "normal", {"level": "high", "within_hours": 4}],
        },
        "damaged": {
            "type": "noul",
            "instructions": "Does the message report damage?",
            "criteria": {"true": {"label": "damaged", "e.g.": ["broken", "cracked"]}, "false": None},
        },
    },
}

REQUEST_EXAMPLES = [
    OpenApiExample(
        "ReadmeRequest",
        value=README_REQUEST,
        request_only=True,
        summary="The README request: one of each type",
        description="A support ticket with a yes/no, a choice and a 3-level score question.",
    ),
    OpenApiExample(
        "ChatTranscriptState",
        value=CHAT_REQUEST,
        request_only=True,
        summary="A chat transcript as the state",
        description="An array of `{role, content}` messages is kept as a conversation, not flattened.",
    ),
    OpenApiExample(
        "Score10Levels",
        value=SCORE_10_REQUEST,
        request_only=True,
        summary="A 10-level score",
        description="Levels lowest first; the answer's `score` is the expected index (0–9).",
    ),
    OpenApiExample(
        "StructuredState",
        value=STRUCTURED_REQUEST,
        request_only=True,
        summary="A structured state, instructions and criteria",
        description="Objects are shown to the model as compact JSON; a null choice description shows the key itself.",
    ),
]

README_RESPONSE: dict[str, Any] = {
    "model": "jev-latest",
    "answers": {
        "refund": {"type": "noul", "noul": 0.93},
        "team": {
            "type": "choice",
            "choice": "Billing",
            "probabilities": {"Billing": 0.91, "Technical": 0.06, "Sales": 0.03},
            "confidence": 0.67,
        },
        "anger": {
            "type": "score",
            "score": 1.52,
            "legend": {"0": "Calm", "1": "Frustrated", "2": "Very angry"},
            "probabilities": {"0": 0.04, "1": 0.4, "2": 0.56},
            "confidence": 0.25,
        },
    },
    "usage": {"input_tokens": 371, "output_tokens": 4},
}


RESPONSE_EXAMPLES = [
    OpenApiExample(
        "ReadmeAnswer",
        value=README_RESPONSE,
        response_only=True,
        status_codes=["200"],
        summary="Answers to the README request",
    ),
    OpenApiExample(
        "Validation",
        response_only=True,
        status_codes=["422"],
        value={
            "detail": [
                {"loc": ["body", "model"], "msg": "Field required", "type": "missing"},
                {
                    "loc": ["body", "questions", "team", "criteria"],
                    "msg": "A choice needs 2 to 255 options, got 1",
                    "type": "too_short",
                },
            ]
        },
    ),
    error_example(
        400, "invalid_request", "the gzip body is corrupt: Error -3 while decompressing data: incorrect header check"
    ),
    *(error_example(status, error_type, message) for status, (error_type, message) in SHARED_ERRORS.items()),
]

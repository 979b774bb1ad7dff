"""The request bodies the server benchmark sends: the issue's R3 and R64 workloads."""

from __future__ import annotations

from typing import Any

from evaluations.openapi.examples import README_REQUEST

STATE_600 = " ".join(
    f"Message {i}: the customer reports that order #{4400 + i} arrived late and the invoice shows a double charge."
    for i in range(24)
)
"""About 600 Qwen3 tokens (24 sentences of ~25 tokens)."""


def question_64(index: int) -> dict[str, Any]:
    """Question `index` of R64: 22 noul, 21 four-option choice and 21 five-level score questions."""
    if index < 22:
        return {"type": "noul", "instructions": f"Does the text mention issue number {index}?"}
    if index < 43:
        return {"type": "choice", "instructions": f"Which team owns topic {index}?",
                "criteria": {"Billing": "Payments", "Logistics": "Shipping", "Support": None, "Sales": "Pricing"}}
    return {"type": "score", "instructions": f"How urgent is aspect {index}?",
            "criteria": ["None", "Low", "Medium", "High", "Critical"]}


WORKLOADS: dict[str, dict[str, Any]] = {
    "R3": README_REQUEST,
    "R64": {"model": "jev-latest", "state": STATE_600, "questions": {f"q{i:02d}": question_64(i) for i in range(64)}},
}

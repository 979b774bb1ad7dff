"""The request bodies the server benchmark sends: the issue's R3 and R64 workloads, in System One's shape and
translated to the Decisions API's (the same questions, so the same prompts and backend work)."""

from __future__ import annotations

from typing import Any

from api.systemone.examples import README_REQUEST

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
        return {
            "type": "choice",
            "instructions": f"Which team owns topic {index}?",
            "criteria": {"Billing": "Payments", "Logistics": "Shipping", "Support": None, "Sales": "Pricing"},
        }
    return {
        "type": "score",
        "instructions": f"How urgent is aspect {index}?",
        "criteria": ["None", "Low", "Medium", "High", "Critical"],
    }


WORKLOADS: dict[str, dict[str, Any]] = {
    "R3": README_REQUEST,
    "R64": {"model": "jev-latest", "state": STATE_600, "questions": {f"q{i:02d}": question_64(i) for i in range(64)}},
}


def decisions_body_of(body: dict[str, Any]) -> dict[str, Any]:
    """A System One body as the same request to `POST /v1/decisions`: each question under its id as name."""
    questions = []
    for name, question in body["questions"].items():
        asked: dict[str, Any] = {"name": name, "instructions": question["instructions"]}
        if question["type"] == "noul":
            asked["type"] = "predicate"
        elif question["type"] == "choice":
            asked |= {
                "type": "choice",
                "choices": [
                    {"value": key} if text is None else {"value": key, "description": text}
                    for key, text in question["criteria"].items()
                ],
            }
        else:
            asked |= {"type": "score", "levels": [{"label": level} for level in question["criteria"]]}
        questions.append(asked)
    return {"model": body["model"], "input": body["state"], "questions": questions}


API_PATHS = {"systemone": "/v1/systemone", "decisions": "/v1/decisions"}
R400 = {
    "model": "jev-latest",
    "state": README_REQUEST["state"],
    "questions": {f"q{i:03d}": question_64(i % 64) for i in range(400)},
}
"""OpenAI's Decisions API takes up to 400 questions (System One 64): R64's questions, each asked six or seven
times under new names, on the README's short state. Every branch reads the state again, so 400 questions over
R64's 600-token state need about 270,000 prompt tokens, over `OPENJEV_MAX_TOTAL_INPUT_TOKENS` (262,144): a 400."""
BODIES: dict[str, dict[str, dict[str, Any]]] = {
    "systemone": WORKLOADS,
    "decisions": {name: decisions_body_of(body) for name, body in {**WORKLOADS, "R400": R400}.items()},
}
"""Workload bodies by API, then by name (R400 on `/v1/decisions` only)."""

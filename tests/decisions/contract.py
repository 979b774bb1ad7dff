"""The response contract's cases for OpenAI's Decisions shape on `POST /v1/decisions`: each documented status
produced through the application, each answer checked against the document by `tests/docs/test_response_contract.py`
(Google's shape on the same path supplies its own, `tests/google/contract.py`)."""

from __future__ import annotations

from api.decisions import answer as decisions_answer
from api.decisions.openapi_examples import DECISIONS_CHAT_REQUEST, DECISIONS_REQUEST
from tests.docs.contract import Case, Operation, evaluating_cases, ok, raw

PATH = "/v1/decisions"
UNKNOWN_MODEL = {**DECISIONS_REQUEST, "model": "gpt-6-luna"}
INVALID = {**DECISIONS_REQUEST, "questions": [{"type": "choice", "instructions": "?", "choices": []}]}

DECISIONS_CASES: dict[Operation, list[Case]] = {
    ("post", PATH): [
        Case("the README questions: a predicate, a choice and a score", 200, ok(PATH, DECISIONS_REQUEST)),
        Case("messages and tool calls; boolean choices, no names", 200, ok(PATH, DECISIONS_CHAT_REQUEST)),
        Case("every answer a refusal", 200, ok(PATH, DECISIONS_REQUEST, refusal_label_mass=1.0)),
        Case("a choice question without choices", 400, ok(PATH, INVALID)),
        Case("a body that is not JSON", 400, raw(PATH, b'{"model": ', {"Content-Type": "application/json"})),
        Case("a model not served here", 404, ok(PATH, UNKNOWN_MODEL)),
        *evaluating_cases(PATH, DECISIONS_REQUEST, renderer=(decisions_answer, "decided_render")),
    ]
}

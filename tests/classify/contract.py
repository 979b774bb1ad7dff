"""The response contract's cases for `POST /v1/classify`: each documented status produced through the application,
each answer checked against the document by `tests/docs/test_response_contract.py`."""

from __future__ import annotations

from api.classify import answer as classify_answer
from api.classify import registry
from api.classify.openapi import CLASSIFY_REQUEST
from tests.docs.contract import Case, Ctx, Operation, Reply, evaluating_cases, ok

PATH = "/v1/classify"


async def _classifiers_unreadable(ctx: Ctx) -> Reply:
    ctx.broken(registry, "_classifiers_fetch")
    registry.classifier_cache_forget()
    return await ctx.post(PATH, CLASSIFY_REQUEST)


CLASSIFY_CASES: dict[Operation, list[Case]] = {
    ("post", PATH): [
        Case("two texts, a choice classifier", 200, ok(PATH, CLASSIFY_REQUEST, classifiers=True)),
        Case("one text, a noul classifier", 200, ok(PATH, {"model": "spam", "input": "Win!"}, classifiers=True)),
        Case("`input` missing", 400, ok(PATH, {"model": "sentiment"}, classifiers=True)),
        Case("no classifier of that name", 404, ok(PATH, {"model": "sentimnet", "input": "x"})),
        Case("the classifier table cannot be read", 503, _classifiers_unreadable),
        *evaluating_cases(PATH, CLASSIFY_REQUEST, renderer=(classify_answer, "classified_render"), classifiers=True),
    ]
}

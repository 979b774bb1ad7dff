"""The response contract's cases for System One's route and the routes every format shares (`/v1/feedback`,
`/v1/models`, `/v1/limits`, `/health`): each documented status produced through the application, each answer
checked against the document by `tests/docs/test_response_contract.py`."""

from __future__ import annotations

from typing import Any

from django.db import OperationalError

from api import feedback, model_views, status_views
from api.systemone import answer as systemone_answer
from tests.conftest import README_REQUEST
from tests.docs.contract import (
    CORRUPT_GZIP,
    Case,
    Ctx,
    Operation,
    Reply,
    bug,
    cross_site_post,
    evaluating_cases,
    get_path,
    ok,
    raw,
    stalled,
    too_large,
    unauthenticated,
)
from tests.stored import drained

FEEDBACK_BODY = {"request_id": "req_0123456789abcdef0123456789abcdef", "question_id": "team", "label": "Billing"}


async def _feedback_200(ctx: Ctx) -> Reply:
    """Label each question type of a stored evaluation; the last label's response is checked (all must be 200)."""
    ctx.configure(store_evaluations="full")
    evaluated = await ctx.post("/v1/systemone", README_REQUEST)
    assert evaluated.status == 200, evaluated.body
    await drained()
    request_id = evaluated.headers["x-typesafe-request-id"]
    replies = [
        await ctx.post("/v1/feedback", {"request_id": request_id, "question_id": question, "label": label})
        for question, label in (("refund", True), ("anger", 2), ("team", "Billing"))
    ]
    assert [r.status for r in replies] == [200, 200, 200], [r.body for r in replies]
    return replies[-1]


async def _feedback_db_down(ctx: Ctx) -> Reply:
    def unusable(**_: Any) -> Any:
        raise OperationalError("the database is down")

    ctx.patch.setattr(feedback, "answer_find", unusable)
    return await ctx.post("/v1/feedback", FEEDBACK_BODY)


async def _health_auth_on_without_key(ctx: Ctx) -> Reply:
    ctx.auth_on()
    return await ctx.get("/health")


async def _health_backend_dead(ctx: Ctx) -> Reply:
    ctx.fake.dead()
    return await ctx.get("/health")


async def _models_with_classifiers(ctx: Ctx) -> Reply:
    ctx.classifiers()
    return await ctx.get("/v1/models")


SYSTEMONE_CASES: dict[Operation, list[Case]] = {
    ("post", "/v1/systemone"): [
        Case("the README request: a noul, a choice and a score", 200, ok("/v1/systemone", README_REQUEST)),
        Case(
            "questions that are invalid in several ways",
            422,
            ok("/v1/systemone", {**README_REQUEST, "questions": {"q": {"type": "box"}}, "model": "nope"}),
        ),
        Case("a body that is not JSON", 422, raw("/v1/systemone", b'{"model": ', {"Content-Type": "application/json"})),
        *evaluating_cases("/v1/systemone", README_REQUEST, renderer=(systemone_answer, "served_render")),
    ],
}

SHARED_ROUTE_CASES: dict[Operation, list[Case]] = {
    ("post", "/v1/feedback"): [
        Case("a label for each question type of a stored evaluation", 200, _feedback_200),
        Case("no stored answer of that id", 404, ok("/v1/feedback", FEEDBACK_BODY)),
        Case("a label missing, an unknown field", 422, ok("/v1/feedback", {"request_id": "req_x", "extra": 1})),
        Case("the database cannot be used", 503, _feedback_db_down),
        Case("a bug", 500, bug("/v1/feedback", FEEDBACK_BODY, feedback, "feedback_record")),
        Case("a body that is not the gzip it claims", 400, raw("/v1/feedback", b"not gzip", CORRUPT_GZIP)),
        Case("no key while auth is on", 401, unauthenticated("/v1/feedback", FEEDBACK_BODY)),
        Case("a browser post from another origin", 403, cross_site_post("/v1/feedback", FEEDBACK_BODY)),
        Case("a body that stops arriving", 408, stalled("/v1/feedback")),
        Case("a body over max_body_bytes", 413, too_large("/v1/feedback")),
        Case("a body not declared JSON", 415, raw("/v1/feedback", b"{}", {"Content-Type": "text/plain"})),
    ],
    ("get", "/v1/models"): [
        Case("the model names, and the classifiers", 200, _models_with_classifiers),
        Case("no key while auth is on", 401, unauthenticated("/v1/models")),
        Case("a bug", 500, bug("/v1/models", None, model_views, "wire_formats")),
    ],
    ("get", "/v1/models/{model_id}"): [
        Case("a listed model", 200, get_path("/v1/models/jev-latest")),
        Case("no key while auth is on", 401, unauthenticated("/v1/models/jev-latest")),
        Case("a name not listed", 404, get_path("/v1/models/gpt-6-luna")),
    ],
    ("get", "/v1/limits"): [
        Case("the limits", 200, get_path("/v1/limits")),
        Case("no key while auth is on", 401, unauthenticated("/v1/limits")),
        Case("a bug", 500, bug("/v1/limits", None, status_views, "images_accepted")),
    ],
    ("get", "/health"): [
        Case("ready, auth off: the model and the worker named", 200, get_path("/health")),
        Case("ready, auth on, no key: neither named", 200, _health_auth_on_without_key),
        Case("the backend does not answer", 503, _health_backend_dead),
        Case("a bug", 500, bug("/health", None, status_views, "evaluator_status")),
    ],
    ("get", "/health/live"): [Case("alive", 200, get_path("/health/live"))],
}
"""The routes no format owns; `/v1/feedback` needs stored evaluations (`NEEDS_DATABASE`)."""

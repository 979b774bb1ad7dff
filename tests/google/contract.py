"""The response contract's cases for Google's Decisions shape, on `POST /v1/decisions` beside OpenAI's and alone on
`POST /v1beta/decisions` (its clients' default path): each documented status produced through the application,
each answer checked against the document by `tests/docs/test_response_contract.py`."""

from __future__ import annotations

import json

from api.google import answer as google_answer
from api.google.openapi import GOOGLE_REQUEST, PATH, V1BETA_PATH
from tests.docs.contract import (
    BROTLI,
    CORRUPT_GZIP,
    KEY,
    Case,
    Ctx,
    Drive,
    Operation,
    Reply,
    backend_dead,
    backend_failing,
    backend_slow,
    bug,
    cross_site_post,
    limits_unreadable,
    ok,
    overloaded,
    rate_limited,
    raw,
    stalled,
    too_large,
    unauthenticated,
)

INVALID = {**GOOGLE_REQUEST, "questions": {"team": {"type": "choice", "instructions": "?", "criteria": {"a": ""}}}}


KEY_HEADER = {"x-goog-api-key": KEY}
"""Google's SDK's key header: what puts the errors before the body is read in Google's shape."""


def _wrong_key(path: str) -> Drive:
    async def drive(ctx: Ctx) -> Reply:
        ctx.auth_on()
        return await ctx.post(path, GOOGLE_REQUEST, headers={"x-goog-api-key": "not-the-key"})

    return drive


async def _rate_limited(ctx: Ctx) -> Reply:
    ctx.configure(key_requests_per_minute=1)
    first = await ctx.post(PATH, GOOGLE_REQUEST, headers=KEY_HEADER)
    assert first.status == 200, first.body
    return await ctx.post(PATH, GOOGLE_REQUEST, headers=KEY_HEADER)


GOOGLE_CASES: dict[Operation, list[Case]] = {
    ("post", PATH): [
        Case("Google's shape: the README questions", 200, ok(PATH, GOOGLE_REQUEST)),
        Case("Google's shape: a choice with one option", 400, ok(PATH, INVALID)),
        Case(
            "Google's shape: a model not served here",
            404,
            ok(PATH, {**GOOGLE_REQUEST, "model": "models/gemini-decision-1"}),
        ),
        Case("Google's shape: a wrong x-goog-api-key", 401, _wrong_key(PATH)),
        Case("Google's shape: over the requests per minute", 429, _rate_limited),
        Case("Google's shape: the backend is down", 503, backend_dead(PATH, GOOGLE_REQUEST)),
    ],
    ("post", V1BETA_PATH): [
        Case("the README questions", 200, ok(V1BETA_PATH, GOOGLE_REQUEST)),
        Case("a choice with one option", 400, ok(V1BETA_PATH, INVALID)),
        Case("a body that is not JSON", 400, raw(V1BETA_PATH, b'{"model": ', {"Content-Type": "application/json"})),
        Case("a body that is not the gzip it claims", 400, raw(V1BETA_PATH, b"not gzip at all", CORRUPT_GZIP)),
        Case("no key while auth is on", 401, unauthenticated(V1BETA_PATH, GOOGLE_REQUEST)),
        Case("a wrong x-goog-api-key", 401, _wrong_key(V1BETA_PATH)),
        Case("a browser post from another origin", 403, cross_site_post(V1BETA_PATH, GOOGLE_REQUEST)),
        Case("a model not served here", 404, ok(V1BETA_PATH, {**GOOGLE_REQUEST, "model": "models/gemini-1"})),
        Case("a body that stops arriving", 408, stalled(V1BETA_PATH)),
        Case("a body over max_body_bytes", 413, too_large(V1BETA_PATH)),
        Case("an unsupported Content-Encoding", 415, raw(V1BETA_PATH, json.dumps(GOOGLE_REQUEST).encode(), BROTLI)),
        Case("over the requests per minute", 429, rate_limited(V1BETA_PATH, GOOGLE_REQUEST)),
        Case("rate limits that cannot be counted", 429, limits_unreadable(V1BETA_PATH, GOOGLE_REQUEST)),
        Case("a bug while rendering", 500, bug(V1BETA_PATH, GOOGLE_REQUEST, google_answer, "decided_render")),
        Case("the backend answers an error", 502, backend_failing(V1BETA_PATH, GOOGLE_REQUEST)),
        Case("the backend is down", 503, backend_dead(V1BETA_PATH, GOOGLE_REQUEST)),
        Case("the evaluation runs past its deadline", 504, backend_slow(V1BETA_PATH, GOOGLE_REQUEST)),
        Case("more evaluations than max_concurrent_requests", 529, overloaded(V1BETA_PATH, GOOGLE_REQUEST)),
    ],
}
